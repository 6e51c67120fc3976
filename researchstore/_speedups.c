/* Hot loops in C: snippets' (highlight.py, fragments.py) and counting an
 * ASCII text's tokens (index.count_tokens).
 *
 * Optional: researchstore works without it (speedups.py: the same steps are
 * taken in Python, or by Tantivy), and tests check that both give the same
 * answers.
 *
 *   words(texts, prefixes, stopwords)
 *       -> [(starts, ends, words, wide) or None for each text]
 *
 * A word is a run of letters and digits (str.isalnum; the index's simple
 * tokenizer splits on the rest). An ASCII word is kept, lower-cased, when
 *   - its first three letters are one of ``prefixes`` and it is at most
 *     LONGEST letters long (a longer one the index drops), or
 *   - it starts with one of the ``prefixes`` shorter than three letters and
 *     is at most SHORT_MOST letters long,
 * and it is not one of ``stopwords``. A word with a letter past ASCII is
 * only placed (``wide``): folding it as the index does is Tantivy's, from
 * Python. A text that may hold CJK gets None: it is indexed as bigrams; so
 * does one holding U+0130, which lower-cases to two characters.
 *
 *   fragment(text, starts, ends, max_chars, words) -> str
 *
 * fragments.fragment_html: the window with the most distinct matched words,
 * HTML-escaped, the matches in <b>.
 *
 *   count_tokens(text, stopwords) -> int or None
 *
 * How many tokens the index's English analyzer, less its stemmer, yields for
 * an ASCII text: runs of letters and digits shorter than 40, lower-cased, not
 * one of ``stopwords``. None for any other text (Tantivy counts it).
 *
 *   name_evidence(names, rules) -> str, None or NotImplemented
 *
 * html_rules._read_names for an ASCII ``names`` (an element's class and
 * id): which of ``rules``' words (a whole run of letters) or parts (anywhere)
 * it holds. NotImplemented for any other text (Python reads it).
 *
 *   markup_depth(text, flat, raw) -> int
 *
 * html_rules.limit_markup's bound on how deeply a page's tags nest, tags
 * inside raw-text elements and comments not counted.
 *
 *   markup_attributes(text, raw, foreign) -> int
 *
 * html_rules.limit_markup's bound on attributes: the most one tag holds.
 *
 *   lexbor_bind, evidence_at; lexbor_tree, lexbor_node, elements_at, marked_at,
 *   ancestor_in, text_length,
 *   paragraphs_at, paragraph_scores, link_chars_at, collapsed_link_chars, walk_blocks,
 *   list_text
 *
 * Read selectolax's own tree (Lexbor's functions, which its module exports):
 * the attributes that mark chrome, the paragraphs the densest element is
 * chosen by, and the walk that turns the chosen element into blocks, as
 * html.py does in Python. html.py binds them only after reading a page both
 * ways; tests hold the two alike on any markup.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* highlight.py's _LONGEST - 1 (the index drops a token of 40 bytes). */
#define LONGEST 39
/* highlight.py's _PREFIX + _SHORT_TAIL. */
#define SHORT_MOST 5
/* Letters and digits, numbered 0..35 (36: any other byte). */
#define SYMBOLS 36

static signed char code_of[256];
/* Each Latin-1 character's class: 0 splits words, 1 is an ASCII letter or
 * digit, 2 a letter or digit past ASCII. */
static unsigned char latin1_class[256];


#define THREES (SYMBOLS * SYMBOLS * SYMBOLS)

/* The prefixes, by their letters' numbers (``code_of``); the three-letter
 * ones a bit each, so that the table is cheap to clear for every call. */
typedef struct {
    unsigned char one[SYMBOLS];
    unsigned char two[SYMBOLS * SYMBOLS];
    uint64_t three[(THREES + 63) / 64];
    int any_short;
} Prefixes;

static void init_codes(void) {
    memset(code_of, -1, sizeof code_of);
    for (int c = 0; c < 26; c++) {
        code_of['a' + c] = (signed char)c;
        code_of['A' + c] = (signed char)c;
    }
    for (int d = 0; d < 10; d++) {
        code_of['0' + d] = (signed char)(26 + d);
    }
    for (int c = 0; c < 256; c++) {
        latin1_class[c] = c < 128 ? code_of[c] >= 0 : Py_UNICODE_ISALNUM((Py_UCS4)c) ? 2 : 0;
    }
}

/* Stop words as numbers (up to 8 ASCII letters, one a byte), sorted; the
 * set they were read from is kept, so that each call need not read it. */
static PyObject *stop_set = NULL;
static uint64_t stop_codes[256];
static Py_ssize_t stop_count = -1; /* -1: a stop word that is no such number */
/* The longest stop word: a longer word is never looked up. */
static Py_ssize_t stop_longest = 0;

static uint64_t pack(const unsigned char *letters, Py_ssize_t length) {
    uint64_t code = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        code |= (uint64_t)letters[i] << (8 * i);
    }
    return code;
}

static int compare_codes(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Read ``stopwords`` into ``stop_codes`` unless they are the ones read last. */
static int read_stopwords(PyObject *stopwords) {
    if (stopwords == stop_set) {
        return 0;
    }
    Py_ssize_t count = 0, most = 0;
    PyObject *iterator = PyObject_GetIter(stopwords);
    if (iterator == NULL) {
        return -1;
    }
    PyObject *item;
    while ((item = PyIter_Next(iterator)) != NULL) {
        Py_ssize_t length = PyUnicode_Check(item) ? PyUnicode_GET_LENGTH(item) : 0;
        most = length > most ? length : most;
        if (count >= 0 && PyUnicode_Check(item) && PyUnicode_IS_ASCII(item) && length >= 1 &&
            length <= 8 && count < 256) {
            stop_codes[count++] = pack(PyUnicode_1BYTE_DATA(item), length);
        } else {
            count = -1;
        }
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (count > 0) {
        qsort(stop_codes, (size_t)count, sizeof stop_codes[0], compare_codes);
    }
    stop_count = count;
    stop_longest = most;
    Py_INCREF(stopwords);
    Py_XSETREF(stop_set, stopwords);
    return 0;
}

/* Fill ``table`` from the prefixes; -1 with an exception set on error. */
static int read_prefixes(PyObject *prefixes, Prefixes *table) {
    memset(table, 0, sizeof *table);
    PyObject *iterator = PyObject_GetIter(prefixes);
    if (iterator == NULL) {
        return -1;
    }
    PyObject *item;
    while ((item = PyIter_Next(iterator)) != NULL) {
        if (!PyUnicode_Check(item)) {
            Py_DECREF(item);
            Py_DECREF(iterator);
            PyErr_SetString(PyExc_TypeError, "prefixes must be strings");
            return -1;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(item);
        if (PyUnicode_IS_ASCII(item) && length >= 1 && length <= 3) {
            const unsigned char *data = PyUnicode_1BYTE_DATA(item);
            int codes[3];
            int valid = 1;
            for (Py_ssize_t i = 0; i < length; i++) {
                /* Only lower-case letters and digits: a word is lower-cased. */
                if (data[i] >= 'A' && data[i] <= 'Z') {
                    valid = 0;
                }
                codes[i] = code_of[data[i]];
                if (codes[i] < 0) {
                    valid = 0;
                }
            }
            if (valid) {
                if (length == 1) {
                    table->one[codes[0]] = 1;
                    table->any_short = 1;
                } else if (length == 2) {
                    table->two[codes[0] * SYMBOLS + codes[1]] = 1;
                    table->any_short = 1;
                } else {
                    int at = (codes[0] * SYMBOLS + codes[1]) * SYMBOLS + codes[2];
                    table->three[at / 64] |= (uint64_t)1 << (at % 64);
                }
            }
        }
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

static int wanted(const Prefixes *table, const int *codes, Py_ssize_t length) {
    if (length > LONGEST) {
        return 0;
    }
    if (length >= 3) {
        int at = (codes[0] * SYMBOLS + codes[1]) * SYMBOLS + codes[2];
        if (table->three[at / 64] >> (at % 64) & 1) {
            return 1;
        }
    }
    if (length > SHORT_MOST || !table->any_short) {
        return 0;
    }
    return table->one[codes[0]] || (length >= 2 && table->two[codes[0] * SYMBOLS + codes[1]]);
}

/* Whether the character at ``i`` is a letter or digit (str.isalnum). */
static inline int is_alnum(int kind, const void *data, Py_ssize_t i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    return c < 128 ? code_of[c] >= 0 : Py_UNICODE_ISALNUM(c);
}

/* The next word from ``*at``: its start in ``*start``, its end in ``*at``,
 * whether it is all ASCII in ``*narrow``; 0 at the end of the text. */
static inline int next_word(int kind, const void *data, Py_ssize_t size, Py_ssize_t *at,
                            Py_ssize_t *start, int *narrow) {
    Py_ssize_t i = *at;
    if (kind == PyUnicode_1BYTE_KIND) {
        /* Most texts: a table lookup a character. */
        const Py_UCS1 *bytes = data;
        unsigned char seen = 1;
        while (i < size && !latin1_class[bytes[i]]) {
            i++;
        }
        *start = i;
        while (i < size && latin1_class[bytes[i]]) {
            seen |= latin1_class[bytes[i]];
            i++;
        }
        *narrow = seen == 1;
    } else {
        while (i < size && !is_alnum(kind, data, i)) {
            i++;
        }
        *start = i;
        *narrow = 1;
        while (i < size && is_alnum(kind, data, i)) {
            if (PyUnicode_READ(kind, data, i) > 127) {
                *narrow = 0;
            }
            i++;
        }
    }
    *at = i;
    return *start < size;
}

/* Whether a character may be CJK (language.has_cjk's hints): such a text
 * is indexed as bigrams, which is Python's to do. */
static inline int maybe_cjk(Py_UCS4 c) {
    return (c >= 0x2e80 && c <= 0x2fa1f) || (c >= 0x1100 && c <= 0x11ff);
}

static int append_int(PyObject *list, Py_ssize_t value) {
    PyObject *number = PyLong_FromSsize_t(value);
    if (number == NULL) {
        return -1;
    }
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

/* One text's (starts, ends, words, wide), or None for a text that may hold
 * CJK; NULL with an exception on error. */
static PyObject *text_words(PyObject *text, const Prefixes *table, PyObject *stopwords) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    if (kind != PyUnicode_1BYTE_KIND) {
        for (Py_ssize_t i = 0; i < size; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            /* U+0130 is the one character that lower-cases to two ("i̇"),
             * which moves every word after it in the lower-cased text. */
            if (maybe_cjk(c) || c == 0x130) {
                Py_RETURN_NONE;
            }
        }
    }
    PyObject *found = NULL;
    PyObject *starts = PyList_New(0);
    PyObject *ends = PyList_New(0);
    PyObject *words = PyList_New(0);
    PyObject *wide = PyList_New(0);
    if (starts == NULL || ends == NULL || words == NULL || wide == NULL) {
        goto done;
    }
    Py_ssize_t at = 0, start;
    int codes[3], narrow;
    while (next_word(kind, data, size, &at, &start, &narrow)) {
        if (!narrow) {
            /* A letter past ASCII: folded in Python, as the index folds it. */
            if (append_int(wide, start) < 0 || append_int(wide, at) < 0) {
                goto done;
            }
            continue;
        }
        Py_ssize_t length = at - start;
        for (Py_ssize_t i = 0; i < 3 && i < length; i++) {
            codes[i] = code_of[PyUnicode_READ(kind, data, start + i)];
        }
        if (!wanted(table, codes, length)) {
            continue;
        }
        PyObject *word = PyUnicode_New(length, 127);
        if (word == NULL) {
            goto done;
        }
        unsigned char *out = PyUnicode_1BYTE_DATA(word);
        for (Py_ssize_t i = 0; i < length; i++) {
            unsigned char c = (unsigned char)PyUnicode_READ(kind, data, start + i);
            out[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        int stop = length <= stop_longest ? PySet_Contains(stopwords, word) : 0;
        int failed = stop < 0 || (!stop && (append_int(starts, start) < 0 ||
                                            append_int(ends, at) < 0 ||
                                            PyList_Append(words, word) < 0));
        Py_DECREF(word);
        if (failed) {
            goto done;
        }
    }
    found = PyTuple_Pack(4, starts, ends, words, wide);
done:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(words);
    Py_XDECREF(wide);
    return found;
}

static PyObject *find_words(PyObject *module, PyObject *args) {
    PyObject *texts, *prefixes, *stopwords;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!OO!:words", &PyList_Type, &texts, &prefixes,
                          &PyFrozenSet_Type, &stopwords)) {
        return NULL;
    }
    Prefixes table_here;
    Prefixes *table = &table_here;
    PyObject *result = NULL;
    if (read_prefixes(prefixes, table) < 0 || read_stopwords(stopwords) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(texts);
    result = PyList_New(count);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        PyObject *found = PyUnicode_Check(text) ? text_words(text, table, stopwords) : NULL;
        if (found == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "texts must be strings");
            }
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, found);
    }
done:
    return result;
}

/* -- fragment: fragments.fragment_html ------------------------------------------ */

/* The first index in ``values[lo:count]`` whose value is above ``x``. */
static Py_ssize_t bisect_right(const Py_ssize_t *values, Py_ssize_t count, Py_ssize_t x,
                               Py_ssize_t lo) {
    Py_ssize_t hi = count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < values[mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

/* The first index in ``values`` whose value is at least ``x``. */
static Py_ssize_t bisect_left(const Py_ssize_t *values, Py_ssize_t count, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (values[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* fragments.word_start. */
static Py_ssize_t word_start(int kind, const void *data, Py_ssize_t size, Py_ssize_t at) {
    Py_ssize_t floor = at - 20 > 0 ? at - 20 : 0;
    while (at > floor && is_alnum(kind, data, at - 1) && at < size &&
           is_alnum(kind, data, at)) {
        at--;
    }
    return at;
}

/* fragments._best_window: the match starting the window with the most distinct words. */
static Py_ssize_t best_window(const Py_ssize_t *ids, Py_ssize_t distinct, const Py_ssize_t *starts,
                              const Py_ssize_t *ends, Py_ssize_t count, Py_ssize_t max_chars,
                              Py_ssize_t *seen) {
    if (ends[count - 1] - starts[0] <= max_chars) {
        return 0;
    }
    Py_ssize_t best_first = 0, best_count = 0;
    for (Py_ssize_t first = 0; first < count; first++) {
        if (count - first <= best_count) {
            break;
        }
        Py_ssize_t end = bisect_right(ends, count, starts[first] + max_chars, first);
        if (end - first <= best_count) {
            continue;
        }
        Py_ssize_t found = 0;
        for (Py_ssize_t k = first; k < end; k++) {
            if (seen[ids[k]] != first + 1) {
                seen[ids[k]] = first + 1;
                found++;
            }
        }
        if (found > best_count) {
            best_first = first;
            best_count = found;
            if (found == distinct) {
                break;
            }
        }
    }
    return best_first;
}

typedef struct {
    Py_UCS4 *data;
    Py_ssize_t size, room;
} Out;

static int put(Out *out, Py_UCS4 c) {
    if (out->size == out->room) {
        Py_ssize_t room = out->room * 2 + 64;
        Py_UCS4 *grown = PyMem_Realloc(out->data, (size_t)room * sizeof(Py_UCS4));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        out->data = grown;
        out->room = room;
    }
    out->data[out->size++] = c;
    return 0;
}

static int put_ascii(Out *out, const char *text) {
    for (; *text; text++) {
        if (put(out, (Py_UCS4)(unsigned char)*text) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ``text[start:end]``, HTML-escaped. */
static int put_escaped(Out *out, int kind, const void *data, Py_ssize_t start, Py_ssize_t end) {
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int failed = c == '&'   ? put_ascii(out, "&amp;")
                     : c == '<' ? put_ascii(out, "&lt;")
                     : c == '>' ? put_ascii(out, "&gt;")
                                : put(out, c);
        if (failed < 0) {
            return -1;
        }
    }
    return 0;
}

/* A list of ints as an array (PyMem); NULL with an exception on error. */
static Py_ssize_t *int_array(PyObject *list, Py_ssize_t count) {
    Py_ssize_t *values = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Py_ssize_t));
    if (values == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        values[i] = PyLong_AsSsize_t(PyList_GET_ITEM(list, i));
        if (values[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(values);
            return NULL;
        }
    }
    return values;
}

static PyObject *fragment(PyObject *module, PyObject *args) {
    PyObject *text, *starts_list, *ends_list, *words;
    Py_ssize_t max_chars;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!O!nO!:fragment", &text, &PyList_Type, &starts_list,
                          &PyList_Type, &ends_list, &max_chars, &PyList_Type, &words)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(starts_list);
    if (count == 0 || PyList_GET_SIZE(ends_list) != count || PyList_GET_SIZE(words) != count) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and words: one of each per match");
        return NULL;
    }
    PyObject *result = NULL, *numbers = NULL;
    Out out = {NULL, 0, 0};
    Py_ssize_t *starts = int_array(starts_list, count);
    Py_ssize_t *ends = starts ? int_array(ends_list, count) : NULL;
    Py_ssize_t *ids = PyMem_Malloc((size_t)count * sizeof(Py_ssize_t));
    Py_ssize_t *seen = PyMem_Calloc((size_t)count, sizeof(Py_ssize_t));
    if (starts == NULL || ends == NULL || ids == NULL || seen == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    /* Each distinct word a number, for counting the words of a window. */
    numbers = PyDict_New();
    if (numbers == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *known = PyDict_GetItemWithError(numbers, PyList_GET_ITEM(words, k));
        if (known != NULL) {
            ids[k] = PyLong_AsSsize_t(known);
            continue;
        }
        if (PyErr_Occurred()) {
            goto done;
        }
        PyObject *number = PyLong_FromSsize_t(PyDict_GET_SIZE(numbers));
        if (number == NULL ||
            PyDict_SetItem(numbers, PyList_GET_ITEM(words, k), number) < 0) {
            Py_XDECREF(number);
            goto done;
        }
        ids[k] = PyDict_GET_SIZE(numbers) - 1;
        Py_DECREF(number);
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_ssize_t first =
        best_window(ids, PyDict_GET_SIZE(numbers), starts, ends, count, max_chars, seen);
    Py_ssize_t best_start = starts[first];
    Py_ssize_t last = bisect_right(ends, count, best_start + max_chars, first);
    Py_ssize_t last_end = last > first ? ends[last - 1] : best_start;
    Py_ssize_t room = max_chars - (last_end - best_start);
    Py_ssize_t lead = (room > 0 ? room : 0) / 4;
    Py_ssize_t begin = best_start - lead < size - max_chars ? best_start - lead : size - max_chars;
    begin = word_start(kind, data, size, begin > 0 ? begin : 0);
    Py_ssize_t end = last_end > begin + max_chars ? last_end : begin + max_chars;
    end = end < size ? end : size;
    if (end < size) {
        Py_ssize_t cut = word_start(kind, data, size, end);
        end = last_end > cut ? last_end : cut;
    }
    Py_ssize_t at = begin;
    for (Py_ssize_t k = bisect_left(starts, count, begin); k < bisect_right(ends, count, end, 0);
         k++) {
        if (put_escaped(&out, kind, data, at, starts[k]) < 0 || put_ascii(&out, "<b>") < 0 ||
            put_escaped(&out, kind, data, starts[k], ends[k]) < 0 ||
            put_ascii(&out, "</b>") < 0) {
            goto done;
        }
        at = ends[k];
    }
    if (put_escaped(&out, kind, data, at, end) < 0) {
        goto done;
    }
    /* str.strip(): whitespace off both ends. */
    Py_ssize_t from = 0, to = out.size;
    while (from < to && Py_UNICODE_ISSPACE(out.data[from])) {
        from++;
    }
    while (to > from && Py_UNICODE_ISSPACE(out.data[to - 1])) {
        to--;
    }
    result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out.data + from, to - from);
done:
    PyMem_Free(out.data);
    PyMem_Free(starts);
    PyMem_Free(ends);
    PyMem_Free(ids);
    PyMem_Free(seen);
    Py_XDECREF(numbers);
    return result;
}

/* -- count_tokens ----------------------------------------------------------------- */

static int is_stopword(uint64_t code) {
    return stop_count > 0 &&
           bsearch(&code, stop_codes, (size_t)stop_count, sizeof stop_codes[0], compare_codes);
}

static PyObject *count_tokens(PyObject *module, PyObject *args) {
    PyObject *text, *stopwords;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!:count_tokens", &text, &PyFrozenSet_Type, &stopwords)) {
        return NULL;
    }
    if (read_stopwords(stopwords) < 0) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text) || stop_count < 0) {
        Py_RETURN_NONE;
    }
    const unsigned char *data = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), at = 0, count = 0;
    unsigned char lowered[8];
    while (at < size) {
        while (at < size && code_of[data[at]] < 0) {
            at++;
        }
        Py_ssize_t start = at;
        while (at < size && code_of[data[at]] >= 0) {
            at++;
        }
        Py_ssize_t length = at - start;
        if (length == 0 || length >= 40) {
            continue; /* the end, or a token the index drops as too long */
        }
        if (length <= 8) {
            for (Py_ssize_t i = 0; i < length; i++) {
                unsigned char c = data[start + i];
                lowered[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
            }
            if (is_stopword(pack(lowered, length))) {
                continue;
            }
        }
        count++;
    }
    return PyLong_FromSsize_t(count);
}

/* -- choose: each text's matches under the analysis that matches most ---------- */

static PyObject *choose(PyObject *module, PyObject *args) {
    PyObject *found, *stems, *terms;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!O!:choose", &PyList_Type, &found, &PyList_Type, &stems,
                          &PyList_Type, &terms)) {
        return NULL;
    }
    Py_ssize_t analyses = PyList_GET_SIZE(stems), texts = PyList_GET_SIZE(found), total = 0;
    if (PyList_GET_SIZE(terms) != analyses) {
        PyErr_SetString(PyExc_ValueError, "stems and terms: one of each per analysis");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < texts; i++) {
        PyObject *entry = PyList_GET_ITEM(found, i);
        if (entry == Py_None) {
            continue;
        }
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4 ||
            !PyList_Check(PyTuple_GET_ITEM(entry, 0)) ||
            !PyList_Check(PyTuple_GET_ITEM(entry, 1)) ||
            !PyList_Check(PyTuple_GET_ITEM(entry, 3)) ||
            PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 1)) !=
                PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 0)) ||
            PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 3)) !=
                PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 0))) {
            PyErr_SetString(PyExc_TypeError, "found: (starts, ends, words, keys) or None");
            return NULL;
        }
        total += PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 0));
    }
    for (Py_ssize_t a = 0; a < analyses; a++) {
        PyObject *list = PyList_GET_ITEM(stems, a);
        if (!PyList_Check(list) || PyList_GET_SIZE(list) != total ||
            !PyAnySet_Check(PyList_GET_ITEM(terms, a))) {
            PyErr_SetString(PyExc_ValueError, "each analysis: a stem per word, a set of terms");
            return NULL;
        }
    }
    PyObject *result = PyList_New(texts);
    if (result == NULL) {
        return NULL;
    }
    Py_ssize_t offset = 0;
    for (Py_ssize_t i = 0; i < texts; i++) {
        PyObject *entry = PyList_GET_ITEM(found, i);
        if (entry == Py_None) {
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
            continue;
        }
        PyObject *starts = PyTuple_GET_ITEM(entry, 0), *ends = PyTuple_GET_ITEM(entry, 1);
        PyObject *keys = PyTuple_GET_ITEM(entry, 3);
        Py_ssize_t count = PyList_GET_SIZE(starts), best = -1, most = 0;
        for (Py_ssize_t a = 0; a < analyses; a++) {
            PyObject *list = PyList_GET_ITEM(stems, a), *wanted = PyList_GET_ITEM(terms, a);
            Py_ssize_t matched = 0;
            for (Py_ssize_t k = 0; k < count; k++) {
                int in = PySet_Contains(wanted, PyList_GET_ITEM(list, offset + k));
                if (in < 0) {
                    Py_DECREF(result);
                    return NULL;
                }
                matched += in;
            }
            if (matched > most) {
                best = a;
                most = matched;
            }
        }
        PyObject *chosen;
        if (best < 0) {
            chosen = Py_BuildValue("([][]O)", Py_None);
        } else {
            PyObject *list = PyList_GET_ITEM(stems, best), *wanted = PyList_GET_ITEM(terms, best);
            PyObject *kept[3] = {PyList_New(0), PyList_New(0), PyList_New(0)};
            int failed = kept[0] == NULL || kept[1] == NULL || kept[2] == NULL;
            for (Py_ssize_t k = 0; k < count && !failed; k++) {
                int in = PySet_Contains(wanted, PyList_GET_ITEM(list, offset + k));
                failed = in < 0 || (in && (PyList_Append(kept[0], PyList_GET_ITEM(starts, k)) < 0 ||
                                           PyList_Append(kept[1], PyList_GET_ITEM(ends, k)) < 0 ||
                                           PyList_Append(kept[2], PyList_GET_ITEM(keys, k)) < 0));
            }
            chosen = failed ? NULL : PyTuple_Pack(3, kept[0], kept[1], kept[2]);
            Py_XDECREF(kept[0]);
            Py_XDECREF(kept[1]);
            Py_XDECREF(kept[2]);
        }
        if (chosen == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, chosen);
        offset += count;
    }
    return result;
}

/* -- name_evidence: what an element's id and class say it is ------------------ */

/* ``rules``' word sets and part tuples as C strings, read once and kept
   (with a reference to ``rules``, which holds the strings). */
#define RULE_SETS 9
#define RULE_WORDS 128
typedef struct {
    const char *text[RULE_WORDS];
    Py_ssize_t length[RULE_WORDS];
    Py_ssize_t count;
    /* A quick no: the lengths of the words (64 and over as 63). */
    unsigned long long lengths;
    /* The words starting with each of a-z, by index, and those starting otherwise. */
    unsigned char by_first[27][RULE_WORDS];
    unsigned char count_by_first[27];
} Words;

static int first_slot(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : 26; }
static PyObject *rules_read = NULL;
static Words rule_words[RULE_SETS];

static int read_rules(PyObject *rules) {
    if (rules == rules_read) {
        return 0;
    }
    if (PyTuple_GET_SIZE(rules) != RULE_SETS) {
        PyErr_SetString(PyExc_ValueError, "name_evidence: rules of another shape");
        return -1;
    }
    Py_CLEAR(rules_read); /* rule_words are rewritten: they match no rules until done */
    for (Py_ssize_t i = 0; i < RULE_SETS; i++) {
        PyObject *iterator = PyObject_GetIter(PyTuple_GET_ITEM(rules, i)), *item;
        if (iterator == NULL) {
            return -1;
        }
        Words *words = &rule_words[i];
        words->count = 0;
        words->lengths = 0;
        memset(words->count_by_first, 0, sizeof words->count_by_first);
        while ((item = PyIter_Next(iterator)) != NULL) {
            /* The item stays alive in ``rules``, held below. */
            const char *text = words->count < RULE_WORDS && PyUnicode_Check(item) &&
                                       PyUnicode_IS_ASCII(item)
                                   ? PyUnicode_AsUTF8AndSize(item, &words->length[words->count])
                                   : NULL;
            Py_DECREF(item);
            if (text == NULL) {
                Py_DECREF(iterator);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError,
                                    "name_evidence: a rule not of at most 128 ASCII words");
                }
                return -1;
            }
            Py_ssize_t length = words->length[words->count];
            words->lengths |= length < 64 ? 1ULL << length : 1ULL << 63;
            if (length > 0) { /* an empty word or part matches nothing */
                int slot = first_slot(text[0]);
                words->by_first[slot][words->count_by_first[slot]++] =
                    (unsigned char)words->count;
            }
            words->text[words->count++] = text;
        }
        Py_DECREF(iterator);
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    Py_INCREF(rules);
    rules_read = rules;
    return 0;
}

static int in_words(const Words *words, const char *text, Py_ssize_t length) {
    if (length <= 0 || !(words->lengths & (length < 64 ? 1ULL << length : 1ULL << 63))) {
        return 0;
    }
    int slot = first_slot(text[0]);
    for (int k = 0; k < words->count_by_first[slot]; k++) {
        int i = words->by_first[slot][k];
        if (words->length[i] == length && memcmp(words->text[i], text, (size_t)length) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether a maximal run of the letters a-z in ``lowered`` is one of ``words``,
   or one of ``parts`` occurs anywhere in it. */
static int word_or_part(const char *lowered, Py_ssize_t size, const Words *words,
                        const Words *parts) {
    Py_ssize_t at = 0;
    while (at < size) {
        while (at < size && !(lowered[at] >= 'a' && lowered[at] <= 'z')) {
            at++;
        }
        Py_ssize_t start = at;
        while (at < size && lowered[at] >= 'a' && lowered[at] <= 'z') {
            at++;
        }
        if (at > start && in_words(words, lowered + start, at - start)) {
            return 1;
        }
    }
    if (parts == NULL || parts->count == 0) {
        return 0;
    }
    for (Py_ssize_t at = 0; at < size; at++) {
        int slot = first_slot(lowered[at]);
        for (int k = 0; k < parts->count_by_first[slot]; k++) {
            int i = parts->by_first[slot][k];
            Py_ssize_t length = parts->length[i];
            if (at + length <= size &&
                memcmp(lowered + at, parts->text[i], (size_t)length) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* An answer as an interned str, each made once (a new reference). */
static PyObject *answer_str(const char *answer) {
    static const char *const known[] = {"role", "comments", "overlay", "region", "name"};
    static PyObject *made[5];
    for (int i = 0; i < 5; i++) {
        if (strcmp(known[i], answer) == 0) {
            if (made[i] == NULL) {
                made[i] = PyUnicode_InternFromString(answer);
                if (made[i] == NULL) {
                    return NULL;
                }
            }
            return Py_NewRef(made[i]);
        }
    }
    return PyUnicode_InternFromString(answer);
}

static const char NO_MEMORY[] = "";

/* What an element's ASCII ``data`` (its class, a space, its id) says of it
   under the rules read last: "comments", "overlay", "region", "name", or NULL
   for nothing; NO_MEMORY where it could not be read. */
static const char *names_answer(const char *data, Py_ssize_t size) {
    /* rules: any words, any parts, comment words, overlay words, overlay parts,
       region words, region parts, camel words, camel regions. */
    const Words *rule = rule_words;
    char small[256];
    char *lowered = size <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)size + 1);
    if (lowered == NULL) {
        return NO_MEMORY;
    }
    int upper = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = data[i];
        upper |= c >= 'A' && c <= 'Z';
        lowered[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    const char *answer = NULL;
    if (word_or_part(lowered, size, &rule[0], &rule[1])) {
        if (word_or_part(lowered, size, &rule[2], NULL)) {
            answer = "comments";
        } else if (word_or_part(lowered, size, &rule[3], &rule[4])) {
            answer = "overlay";
        } else {
            answer = word_or_part(lowered, size, &rule[5], &rule[6]) ? "region" : "name";
        }
    } else if (upper) {
        /* camelCase: pieces split at anything but a letter and where a capital
           follows a small letter ("adBox": "ad", "box"). */
        int region = 0, hit = 0;
        Py_ssize_t start = 0;
        for (Py_ssize_t at = 0; at <= size; at++) {
            char c = at < size ? data[at] : '\0';
            int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            int split = !letter || (at > start && c >= 'A' && c <= 'Z' && data[at - 1] >= 'a' &&
                                    data[at - 1] <= 'z');
            if (!split) {
                continue;
            }
            if (at > start && in_words(&rule[7], lowered + start, at - start)) {
                hit = 1;
                region |= in_words(&rule[8], lowered + start, at - start);
            }
            start = letter ? at : at + 1;
        }
        if (hit) {
            answer = region ? "region" : "name";
        }
    }
    if (lowered != small) {
        PyMem_Free(lowered);
    }
    return answer;
}

static PyObject *name_evidence(PyObject *module, PyObject *args) {
    PyObject *names, *rules;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!:name_evidence", &names, &PyTuple_Type, &rules)) {
        return NULL;
    }
    if (read_rules(rules) < 0) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(names)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const char *answer = names_answer((const char *)PyUnicode_1BYTE_DATA(names),
                                      PyUnicode_GET_LENGTH(names));
    if (answer == NO_MEMORY) {
        return PyErr_NoMemory();
    }
    if (answer == NULL) {
        Py_RETURN_NONE;
    }
    return answer_str(answer);
}

/* -- markup_depth: how deep a page's tags may nest ------------------------------ */

/* Whether ``text`` holds ``name`` (lower-case ASCII) at ``at``, each letter
   in either case, followed by whitespace, "/" or ">". */
static int raw_name_at(int kind, const void *data, Py_ssize_t size, Py_ssize_t at,
                       const char *name, Py_ssize_t length) {
    if (at + length >= size) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, at + i);
        if (c != (Py_UCS4)name[i] && c + 32 != (Py_UCS4)name[i]) {
            return 0;
        }
    }
    Py_UCS4 next = PyUnicode_READ(kind, data, at + length);
    return next == '/' || next == '>' || Py_UNICODE_ISSPACE(next);
}

/* Where the content of a raw-text element or comment starting at ``at`` (its
   "<") ends: the "<" of its end tag, or of "-->"; ``size`` when it is never
   closed. -1 when none starts there (html_rules._mask_raw_text's rules). */
static Py_ssize_t raw_text_end(int kind, const void *data, Py_ssize_t size, Py_ssize_t at,
                               const char **raw, const Py_ssize_t *raw_lengths,
                               Py_ssize_t raw_count) {
    if (at + 3 < size && PyUnicode_READ(kind, data, at + 1) == '!' &&
        PyUnicode_READ(kind, data, at + 2) == '-' && PyUnicode_READ(kind, data, at + 3) == '-') {
        for (Py_ssize_t end = at + 4; end + 2 < size; end++) {
            if (PyUnicode_READ(kind, data, end) == '-' &&
                PyUnicode_READ(kind, data, end + 1) == '-' &&
                PyUnicode_READ(kind, data, end + 2) == '>') {
                return end;
            }
        }
        return size;
    }
    for (Py_ssize_t r = 0; r < raw_count; r++) {
        if (!raw_name_at(kind, data, size, at + 1, raw[r], raw_lengths[r])) {
            continue;
        }
        Py_ssize_t content = at + 1 + raw_lengths[r];
        while (content < size && PyUnicode_READ(kind, data, content) != '>') {
            content++;
        }
        if (content >= size) {
            return -1; /* no ">": not read as the element's start */
        }
        for (Py_ssize_t end = content + 1; end + 1 < size; end++) {
            if (PyUnicode_READ(kind, data, end) == '<' &&
                PyUnicode_READ(kind, data, end + 1) == '/' &&
                raw_name_at(kind, data, size, end + 2, raw[r], raw_lengths[r])) {
                return end;
            }
        }
        return size;
    }
    return -1;
}

/* Reads a tuple of at most 64 ASCII names into ``names`` and ``lengths``. */
static int read_names(PyObject *tuple, const char **names, Py_ssize_t *lengths,
                      Py_ssize_t *count) {
    *count = PyTuple_GET_SIZE(tuple);
    if (*count > 64) {
        PyErr_SetString(PyExc_ValueError, "at most 64 tag names");
        return 0;
    }
    for (Py_ssize_t i = 0; i < *count; i++) {
        names[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(tuple, i), &lengths[i]);
        if (names[i] == NULL) {
            return 0;
        }
    }
    return 1;
}

/* html_rules.limit_markup's bound: the most tags open at once, counting a
   start tag +1 and an end tag -1, save the ``flat`` ones (each ASCII, in lower
   case; a tag name written in lower or in upper case matches). A tag is "<",
   an optional "/", an ASCII letter, then anything but whitespace, "/" or ">".
   What the ``raw`` elements (script, style...) and comments hold is skipped,
   as html_rules._mask_raw_text blanks it. */
static PyObject *markup_depth(PyObject *module, PyObject *args) {
    PyObject *text, *flat, *raw_names;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!O!:markup_depth", &text, &PyTuple_Type, &flat,
                          &PyTuple_Type, &raw_names)) {
        return NULL;
    }
    /* The flat names by length (at most 15 letters). */
    const char *names[64], *raw[64];
    Py_ssize_t lengths[64], count, raw_lengths[64], raw_count;
    if (!read_names(flat, names, lengths, &count) ||
        !read_names(raw_names, raw, raw_lengths, &raw_count)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), depth = 0, deepest = 0;
    for (Py_ssize_t at = 0; at < size; at++) {
        if (PyUnicode_READ(kind, data, at) != '<') {
            continue;
        }
        Py_ssize_t skip_to = raw_text_end(kind, data, size, at, raw, raw_lengths, raw_count);
        if (skip_to >= 0 && PyUnicode_READ(kind, data, at + 1) == '!') {
            at = skip_to - 1; /* a comment: on after it */
            continue;
        }
        Py_ssize_t start = at + 1;
        int closing = start < size && PyUnicode_READ(kind, data, start) == '/';
        Py_ssize_t first = start + closing;
        Py_UCS4 c = first < size ? PyUnicode_READ(kind, data, first) : 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            continue;
        }
        Py_ssize_t end = first + 1;
        while (end < size) {
            c = PyUnicode_READ(kind, data, end);
            if (c == '/' || c == '>' || Py_UNICODE_ISSPACE(c)) {
                break;
            }
            end++;
        }
        /* The name, lower-cased, when it is ASCII and in one case. */
        char lowered[16];
        Py_ssize_t length = end - first;
        int small = 0, capital = 0, ascii = length <= (Py_ssize_t)sizeof lowered;
        for (Py_ssize_t i = 0; ascii && i < length; i++) {
            Py_UCS4 letter = PyUnicode_READ(kind, data, first + i);
            ascii = letter < 128;
            small |= letter >= 'a' && letter <= 'z';
            capital |= letter >= 'A' && letter <= 'Z';
            lowered[i] = (char)((letter >= 'A' && letter <= 'Z') ? letter + 32 : letter);
        }
        int is_flat = 0;
        for (Py_ssize_t i = 0; ascii && !(small && capital) && i < count && !is_flat; i++) {
            is_flat = lengths[i] == length && memcmp(names[i], lowered, (size_t)length) == 0;
        }
        if (!is_flat) {
            depth += closing ? -1 : 1;
            deepest = depth > deepest ? depth : deepest;
        }
        at = end - 1;
        if (skip_to >= 0 && !closing) {
            at = skip_to - 1; /* its end tag is read next, as a tag */
        }
    }
    return PyLong_FromSsize_t(deepest);
}

/* -- markup_attributes: how many attributes a page's tags carry ----------------- */

/* The HTML tokenizer's whitespace (a "\r" is read as "\n"). */
static int html_space(Py_UCS4 c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* Where the next ``c`` (ASCII) is in text[at, size); ``size`` when none is. */
static Py_ssize_t find_char(int kind, const void *data, Py_ssize_t size, Py_ssize_t at,
                            Py_UCS4 c) {
    if (at >= size) {
        return size;
    }
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *start = (const Py_UCS1 *)data;
        const Py_UCS1 *found = memchr(start + at, (int)c, (size_t)(size - at));
        return found == NULL ? size : found - start;
    }
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *wide = (const Py_UCS2 *)data;
        while (at < size && wide[at] != c) {
            at++;
        }
        return at;
    }
    const Py_UCS4 *wider = (const Py_UCS4 *)data;
    while (at < size && wider[at] != c) {
        at++;
    }
    return at;
}

/* Whether text[at, at + length) is ``name`` (lower-case ASCII), each letter
   in either case. */
static int ascii_name_is(int kind, const void *data, Py_ssize_t at, Py_ssize_t length,
                         const char *name, Py_ssize_t name_length) {
    if (length != name_length) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, at + i);
        if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != (Py_UCS4)name[i]) {
            return 0;
        }
    }
    return 1;
}

/* Which of ``names`` text[at, at + length) is, or -1. */
static Py_ssize_t name_among(int kind, const void *data, Py_ssize_t at, Py_ssize_t length,
                             const char **names, const Py_ssize_t *lengths, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (ascii_name_is(kind, data, at, length, names[i], lengths[i])) {
            return i;
        }
    }
    return -1;
}

/* Where scanning goes on after a comment whose "<!--" ends at ``at``: after
   "-->" or "--!>", or right away for "<!-->" and "<!--->"; ``size`` when it
   is never closed (html_rules._comment_end). */
static Py_ssize_t comment_end(int kind, const void *data, Py_ssize_t size, Py_ssize_t at) {
    if (at < size && PyUnicode_READ(kind, data, at) == '>') {
        return at + 1;
    }
    if (at + 1 < size && PyUnicode_READ(kind, data, at) == '-' &&
        PyUnicode_READ(kind, data, at + 1) == '>') {
        return at + 2;
    }
    for (Py_ssize_t end = find_char(kind, data, size, at, '-'); end + 2 < size;
         end = find_char(kind, data, size, end + 1, '-')) {
        if (PyUnicode_READ(kind, data, end + 1) != '-') {
            continue;
        }
        Py_UCS4 next = PyUnicode_READ(kind, data, end + 2);
        if (next == '>') {
            return end + 3;
        }
        if (next == '!' && end + 3 < size && PyUnicode_READ(kind, data, end + 3) == '>') {
            return end + 4;
        }
    }
    return size;
}

/* Where a tag's run of attributes starting at ``at`` ends, and how many it
   holds (html_rules._ATTRIBUTE, one after the other). */
static Py_ssize_t attributes_end(int kind, const void *data, Py_ssize_t size, Py_ssize_t at,
                                 Py_ssize_t *count) {
    *count = 0;
    for (;;) {
        Py_ssize_t p = at;
        Py_UCS4 c;
        while (p < size && (html_space(c = PyUnicode_READ(kind, data, p)) || c == '/')) {
            p++;
        }
        if (p >= size || PyUnicode_READ(kind, data, p) == '>') {
            return at;
        }
        p++; /* the name's first character: anything but those ("=" too) */
        while (p < size && !html_space(c = PyUnicode_READ(kind, data, p)) && c != '/' &&
               c != '=' && c != '>') {
            p++;
        }
        Py_ssize_t q = p;
        while (q < size && html_space(PyUnicode_READ(kind, data, q))) {
            q++;
        }
        if (q < size && PyUnicode_READ(kind, data, q) == '=') {
            q++;
            while (q < size && html_space(PyUnicode_READ(kind, data, q))) {
                q++;
            }
            Py_UCS4 quote = q < size ? PyUnicode_READ(kind, data, q) : 0;
            if (quote == '"' || quote == '\'') {
                q = find_char(kind, data, size, q + 1, quote);
                q += q < size;
            } else if (q < size && quote != '>') {
                while (q < size && !html_space(c = PyUnicode_READ(kind, data, q)) && c != '>') {
                    q++;
                }
            }
            p = q;
        }
        (*count)++;
        at = p;
    }
}

/* html_rules._attribute_runs's scan, keeping the most attributes one tag
   holds. The tokenizer's reading of tags, comments and bogus comments, and
   of the ``raw`` elements' text (outside the ``foreign`` ones: <svg>, <math>). */
static PyObject *markup_attributes(PyObject *module, PyObject *args) {
    PyObject *text, *raw_names, *foreign_names;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!O!:markup_attributes", &text, &PyTuple_Type, &raw_names,
                          &PyTuple_Type, &foreign_names)) {
        return NULL;
    }
    const char *raw[64], *foreign[64];
    Py_ssize_t raw_lengths[64], raw_count, foreign_lengths[64], foreign_count;
    if (!read_names(raw_names, raw, raw_lengths, &raw_count) ||
        !read_names(foreign_names, foreign, foreign_lengths, &foreign_count)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* How many of each foreign element are open, and of all of them. */
    Py_ssize_t open_foreign[64] = {0}, inside_foreign = 0;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), at = 0, most = 0;
    while ((at = find_char(kind, data, size, at, '<')) < size) {
        Py_UCS4 next = at + 1 < size ? PyUnicode_READ(kind, data, at + 1) : 0;
        if (next == '!' && at + 3 < size && PyUnicode_READ(kind, data, at + 2) == '-' &&
            PyUnicode_READ(kind, data, at + 3) == '-') {
            at = comment_end(kind, data, size, at + 4);
            continue;
        }
        int closing = next == '/';
        Py_ssize_t first = at + 1 + closing;
        Py_UCS4 letter = first < size ? PyUnicode_READ(kind, data, first) : 0;
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z'))) {
            if (next != '!' && next != '?' && !closing) {
                at++; /* a "<" of text */
                continue;
            }
            /* a bogus comment, to the next ">" */
            at = find_char(kind, data, size, at + 2, '>') + 1;
            continue;
        }
        Py_ssize_t name_end = first + 1;
        Py_UCS4 c;
        while (name_end < size && !html_space(c = PyUnicode_READ(kind, data, name_end)) &&
               c != '/' && c != '>') {
            name_end++;
        }
        Py_ssize_t count;
        Py_ssize_t run_end = attributes_end(kind, data, size, name_end, &count);
        most = count > most ? count : most;
        Py_ssize_t close = run_end;
        while (close < size && (html_space(c = PyUnicode_READ(kind, data, close)) || c == '/')) {
            close++;
        }
        if (close >= size) {
            break; /* a tag the page's end cuts: nothing follows */
        }
        at = close + 1;
        Py_ssize_t length = name_end - first;
        Py_ssize_t f = name_among(kind, data, first, length, foreign, foreign_lengths,
                                  foreign_count);
        if (closing) {
            if (f >= 0 && open_foreign[f] > 0) {
                open_foreign[f]--;
                inside_foreign--;
            }
            continue;
        }
        if (f >= 0) {
            int self_closing = close > run_end && PyUnicode_READ(kind, data, close - 1) == '/';
            open_foreign[f] += !self_closing;
            inside_foreign += !self_closing;
            continue;
        }
        Py_ssize_t r = inside_foreign ? -1
                                      : name_among(kind, data, first, length, raw, raw_lengths,
                                                   raw_count);
        if (r < 0) {
            continue;
        }
        /* Its text runs to "</name" and whitespace, "/" or ">". */
        Py_ssize_t end = find_char(kind, data, size, at, '<');
        for (; end + 2 + raw_lengths[r] < size; end = find_char(kind, data, size, end + 1, '<')) {
            if (PyUnicode_READ(kind, data, end + 1) == '/' &&
                ascii_name_is(kind, data, end + 2, raw_lengths[r], raw[r], raw_lengths[r]) &&
                (html_space(c = PyUnicode_READ(kind, data, end + 2 + raw_lengths[r])) ||
                 c == '/' || c == '>')) {
                break;
            }
        }
        if (end + 2 + raw_lengths[r] >= size) {
            break; /* never closed: the rest is its text */
        }
        at = end;
    }
    return PyLong_FromSsize_t(most);
}

/* -- selectolax's tree, read in C ---------------------------------------------- */

/* Lexbor, the parser selectolax embeds, exports its tree's functions from
   selectolax's own module: bound here by name (``lexbor_bind``), they read
   the very element a LexborNode points at (its ``mem_id``). Where they
   cannot be bound, the caller reads ``node.attributes`` instead. */
#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define CAN_BIND 1
#else
#define CAN_BIND 0
#endif

typedef struct LxbNode LxbNode; /* lxb_dom_node_t: an element starts with one */
typedef struct LxbAttr LxbAttr; /* lxb_dom_attr_t */

static struct {
    unsigned int (*type)(LxbNode *);
    LxbAttr *(*first_attribute)(LxbNode *);
    LxbAttr *(*next_attribute)(LxbAttr *);
    const unsigned char *(*attribute_name)(LxbAttr *, size_t *);
    const unsigned char *(*attribute_value)(LxbAttr *, size_t *);
    int bound;
} lxb;

#define LXB_ELEMENT_NODE 1

#if CAN_BIND
/* Bind ``count`` functions by name from the module already loaded at
   ``path`` (only it: its tree is the one to read); whether all were found.
   The handle stays open: the module is selectolax's, loaded for good. */
static int bind_symbols(const char *path, const char *const *names, int count, void **found) {
    void *handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL) {
        return 0;
    }
    for (int i = 0; i < count; i++) {
        found[i] = dlsym(handle, names[i]);
        if (found[i] == NULL) {
            dlclose(handle);
            return 0;
        }
    }
    return 1;
}
#endif

static PyObject *lexbor_bind(PyObject *module, PyObject *args) {
    const char *path;
    (void)module;
    if (!PyArg_ParseTuple(args, "s:lexbor_bind", &path)) {
        return NULL;
    }
#if CAN_BIND
    if (!lxb.bound) {
        static const char *const names[5] = {
            "lxb_dom_node_type_noi",       "lxb_dom_element_first_attribute_noi",
            "lxb_dom_element_next_attribute_noi", "lxb_dom_attr_local_name_noi",
            "lxb_dom_attr_value_noi",
        };
        void *found[5];
        if (!bind_symbols(path, names, 5, found)) {
            Py_RETURN_FALSE;
        }
        *(void **)&lxb.type = found[0];
        *(void **)&lxb.first_attribute = found[1];
        *(void **)&lxb.next_attribute = found[2];
        *(void **)&lxb.attribute_name = found[3];
        *(void **)&lxb.attribute_value = found[4];
        lxb.bound = 1;
    }
    Py_RETURN_TRUE;
#else
    (void)path;
    Py_RETURN_FALSE;
#endif
}

/* The attributes the boilerplate checks read, as an element holds them. */
enum { A_CLASS, A_ID, A_ROLE, A_LABEL, A_MODAL, A_ITEMPROP, A_ITEMTYPE, A_COUNT };
static const char *const attribute_names[A_COUNT] = {
    "class", "id", "role", "aria-label", "aria-modal", "itemprop", "itemtype",
};
static const size_t attribute_lengths[A_COUNT] = {5, 2, 4, 10, 10, 8, 8};

typedef struct {
    const unsigned char *value[A_COUNT];
    size_t length[A_COUNT];
    int present[A_COUNT];
} Attributes;

static void read_attributes(LxbNode *element, Attributes *read) {
    memset(read, 0, sizeof *read);
    for (LxbAttr *attr = lxb.first_attribute(element); attr != NULL;
         attr = lxb.next_attribute(attr)) {
        size_t length = 0;
        const unsigned char *name = lxb.attribute_name(attr, &length);
        if (name == NULL) {
            continue;
        }
        for (int i = 0; i < A_COUNT; i++) {
            if (attribute_lengths[i] == length && attribute_names[i][0] == name[0] &&
                memcmp(attribute_names[i], name, length) == 0) {
                size_t value_length = 0;
                const unsigned char *value = lxb.attribute_value(attr, &value_length);
                read->present[i] = 1; /* the last of a name wins, as in a dict */
                read->value[i] = value;
                read->length[i] = value == NULL ? 0 : value_length;
                break;
            }
        }
    }
}

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int is_ascii(const unsigned char *text, size_t length) {
    for (size_t i = 0; i < length; i++) {
        if (text[i] >= 0x80) {
            return 0;
        }
    }
    return 1;
}

/* ``text`` is ``word`` (lower-case ASCII), but for ASCII case. */
static int equals_folded(const unsigned char *text, size_t length, const char *word) {
    size_t size = strlen(word);
    if (length != size) {
        return 0;
    }
    for (size_t i = 0; i < size; i++) {
        if (ascii_lower(text[i]) != word[i]) {
            return 0;
        }
    }
    return 1;
}

/* ``text`` is one of ``words`` (a tuple of ASCII str). */
static int in_tuple(PyObject *words, const unsigned char *text, size_t length, int fold) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        PyObject *word = PyTuple_GET_ITEM(words, i);
        if (!PyUnicode_Check(word) || !PyUnicode_IS_ASCII(word) ||
            (size_t)PyUnicode_GET_LENGTH(word) != length) {
            continue;
        }
        const char *data = (const char *)PyUnicode_1BYTE_DATA(word);
        size_t at = 0;
        while (at < length && (fold ? ascii_lower(text[at]) : text[at]) == (unsigned char)data[at]) {
            at++;
        }
        if (at == length) {
            return 1;
        }
    }
    return 0;
}

static int is_python_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* html_rules.boilerplate_evidence for an element's attributes: the evidence,
   Py_None for none, or Py_NotImplemented where only Python can tell (a label
   or an item type, read with a regular expression; a value past ASCII).
   A new reference. */
static PyObject *evidence_of(const Attributes *a, PyObject *roles, PyObject *itemprops) {
    if (a->length[A_ROLE] > 0) {
        if (!is_ascii(a->value[A_ROLE], a->length[A_ROLE])) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (in_tuple(roles, a->value[A_ROLE], a->length[A_ROLE], 1)) {
            return answer_str("role");
        }
    }
    if (a->length[A_LABEL] > 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (a->length[A_MODAL] > 0) {
        if (!is_ascii(a->value[A_MODAL], a->length[A_MODAL])) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (equals_folded(a->value[A_MODAL], a->length[A_MODAL], "true")) {
            return answer_str("role");
        }
    }
    if (a->length[A_ITEMPROP] > 0) {
        const unsigned char *text = a->value[A_ITEMPROP];
        size_t length = a->length[A_ITEMPROP], at = 0;
        if (!is_ascii(text, length)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        while (at < length) {
            while (at < length && is_python_space(text[at])) {
                at++;
            }
            size_t start = at;
            while (at < length && !is_python_space(text[at])) {
                at++;
            }
            if (at > start && in_tuple(itemprops, text + start, at - start, 0)) {
                return answer_str("role");
            }
        }
    }
    if (a->length[A_ITEMTYPE] > 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* f"{class or ''} {id or ''}" */
    size_t class_length = a->length[A_CLASS], id_length = a->length[A_ID];
    if (!is_ascii(a->value[A_CLASS], class_length) || !is_ascii(a->value[A_ID], id_length)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    size_t size = class_length + 1 + id_length;
    char small[512];
    char *names = size <= sizeof small ? small : PyMem_Malloc(size);
    if (names == NULL) {
        return PyErr_NoMemory();
    }
    if (class_length) {
        memcpy(names, a->value[A_CLASS], class_length);
    }
    names[class_length] = ' ';
    if (id_length) {
        memcpy(names + class_length + 1, a->value[A_ID], id_length);
    }
    const char *answer = names_answer(names, (Py_ssize_t)size);
    if (names != small) {
        PyMem_Free(names);
    }
    if (answer == NO_MEMORY) {
        return PyErr_NoMemory();
    }
    if (answer == NULL) {
        Py_RETURN_NONE;
    }
    return answer_str(answer);
}

/* html_rules.boilerplate_evidence of the elements at ``addresses`` (each a
   LexborNode's mem_id, of a tree alive for the call): for each, its
   evidence, None, or NotImplemented where Python must read it. */
static PyObject *evidence_at(PyObject *module, PyObject *args) {
    PyObject *addresses, *rules, *roles, *itemprops;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:evidence_at", &PyList_Type, &addresses, &PyTuple_Type,
                          &rules, &PyTuple_Type, &roles, &PyTuple_Type, &itemprops)) {
        return NULL;
    }
    if (!lxb.bound) {
        PyErr_SetString(PyExc_RuntimeError, "evidence_at: lexbor_bind first");
        return NULL;
    }
    if (read_rules(rules) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(addresses);
    PyObject *found = PyList_New(count);
    if (found == NULL) {
        return NULL;
    }
    Attributes read;
    for (Py_ssize_t i = 0; i < count; i++) {
        size_t address = PyLong_AsSize_t(PyList_GET_ITEM(addresses, i));
        if (address == (size_t)-1 && PyErr_Occurred()) {
            Py_DECREF(found);
            return NULL;
        }
        LxbNode *node = (LxbNode *)address;
        PyObject *evidence;
        if (node == NULL || lxb.type(node) != LXB_ELEMENT_NODE) {
            evidence = Py_NewRef(Py_NotImplemented);
        } else {
            read_attributes(node, &read);
            evidence = evidence_of(&read, roles, itemprops);
        }
        if (evidence == NULL) {
            Py_DECREF(found);
            return NULL;
        }
        PyList_SET_ITEM(found, i, evidence);
    }
    return found;
}

/* -- paragraphs for html._densest, read in C ------------------------------------ */

/* The rest of Lexbor's tree functions, and selectolax's own way to make a
   LexborNode for an element (its ``new``, first in the table of C methods a
   Cython module that cimports ``selectolax.lexbor`` calls): bound by
   ``lexbor_tree``, which also finds where a text node keeps its text. */
typedef PyObject *(*NewNode)(LxbNode *, PyObject *);

static struct {
    LxbNode *(*first_child)(LxbNode *);
    LxbNode *(*next)(LxbNode *);
    LxbNode *(*parent)(LxbNode *);
    uintptr_t (*tag_id)(LxbNode *);
    const unsigned char *(*qualified_name)(LxbNode *, size_t *);
    const unsigned char *(*attribute_qualified_name)(LxbAttr *, size_t *);
    NewNode new_node;
    Py_ssize_t text_at; /* where a text node's lexbor_str_t (data, length) is */
    int bound;
} tree;

#define LXB_TEXT_NODE 3
#define LXB_DOCUMENT_NODE 9
#define MOST_TEXT_AT 512

typedef struct {
    const unsigned char *data;
    size_t length;
} LxbStr;

static PyObject *lexbor_tree(PyObject *module, PyObject *args) {
    const char *path;
    PyObject *node_type;
    size_t text_address;
    const char *expected;
    Py_ssize_t expected_length;
    (void)module;
    if (!PyArg_ParseTuple(args, "sO!ny#:lexbor_tree", &path, &PyType_Type, &node_type,
                          &text_address, &expected, &expected_length)) {
        return NULL;
    }
#if CAN_BIND
    if (tree.bound) {
        Py_RETURN_TRUE;
    }
    if (!lxb.bound || text_address == 0 || expected_length < 64) {
        Py_RETURN_FALSE;
    }
    static const char *const names[6] = {
        "lxb_dom_node_first_child_noi", "lxb_dom_node_next_noi",
        "lxb_dom_node_parent_noi",      "lxb_dom_node_tag_id_noi",
        "lxb_dom_element_qualified_name", "lxb_dom_attr_qualified_name",
    };
    void *found[6];
    if (!bind_symbols(path, names, 6, found)) {
        Py_RETURN_FALSE;
    }
    PyObject *capsule = PyDict_GetItemString(((PyTypeObject *)node_type)->tp_dict,
                                             "__pyx_vtable__");
    if (capsule == NULL || !PyCapsule_CheckExact(capsule)) {
        Py_RETURN_FALSE;
    }
    void **table = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    if (table == NULL || table[0] == NULL) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    /* A text node holds its text as a lexbor_str_t right after its node
       part, whose size this build of Lexbor decides: found by looking for
       the text the caller gave (long and of an unlikely length, so no other
       field passes for its length). */
    const unsigned char *node = (const unsigned char *)text_address;
    Py_ssize_t at = -1;
    for (Py_ssize_t offset = 8; offset + (Py_ssize_t)sizeof(LxbStr) <= MOST_TEXT_AT;
         offset += 8) {
        LxbStr str;
        memcpy(&str, node + offset, sizeof str);
        if (str.length == (size_t)expected_length && str.data != NULL &&
            memcmp(str.data, expected, (size_t)expected_length) == 0) {
            at = offset;
            break;
        }
    }
    if (at < 0) {
        Py_RETURN_FALSE;
    }
    *(void **)&tree.first_child = found[0];
    *(void **)&tree.next = found[1];
    *(void **)&tree.parent = found[2];
    *(void **)&tree.tag_id = found[3];
    *(void **)&tree.qualified_name = found[4];
    *(void **)&tree.attribute_qualified_name = found[5];
    *(void **)&tree.new_node = table[0];
    tree.text_at = at;
    tree.bound = 1;
    Py_RETURN_TRUE;
#else
    (void)path;
    (void)text_address;
    (void)expected;
    Py_RETURN_FALSE;
#endif
}

static PyObject *lexbor_node(PyObject *module, PyObject *args) {
    PyObject *parser;
    size_t address;
    (void)module;
    if (!PyArg_ParseTuple(args, "On:lexbor_node", &parser, &address)) {
        return NULL;
    }
    if (!tree.bound || address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "lexbor_node: lexbor_tree first, and an address");
        return NULL;
    }
    return tree.new_node((LxbNode *)address, parser);
}

/* The node after ``node`` within ``root``'s subtree, in document order (as
   LexborNode.traverse walks it), or NULL past its end. */
static LxbNode *next_under(LxbNode *node, LxbNode *root) {
    LxbNode *child = tree.first_child(node);
    if (child != NULL) {
        return child;
    }
    while (node != root && tree.next(node) == NULL) {
        node = tree.parent(node);
    }
    return node == root ? NULL : tree.next(node);
}

/* What _densest asks of a tag, as bits. */
enum { T_INLINE = 1, T_PARAGRAPH = 2, T_HEADING = 4, T_LINK = 8, T_TOP = 16, T_READ = 128 };
#define TAG_CACHE 1024

typedef struct {
    PyObject *inline_tags, *paragraph_like, *headings;
    unsigned char cache[TAG_CACHE];
} Tags;

/* The bits of an element's tag (by its qualified name, as LexborNode.tag
   reads it); a node of another type has none, the document T_TOP. */
static int tag_bits(Tags *tags, LxbNode *node) {
    unsigned int type = lxb.type(node);
    if (type != LXB_ELEMENT_NODE) {
        return type == LXB_DOCUMENT_NODE ? T_TOP : 0;
    }
    uintptr_t id = tree.tag_id(node);
    if (id < TAG_CACHE && tags->cache[id]) {
        return tags->cache[id] & ~T_READ;
    }
    size_t length = 0;
    const unsigned char *name = tree.qualified_name(node, &length);
    if (name == NULL) {
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)name, (Py_ssize_t)length, "replace");
    if (text == NULL) {
        return -1;
    }
    int bits = 0;
    int in_inline = PySequence_Contains(tags->inline_tags, text);
    int in_paragraph = PySequence_Contains(tags->paragraph_like, text);
    int in_headings = PySequence_Contains(tags->headings, text);
    Py_DECREF(text);
    if (in_inline < 0 || in_paragraph < 0 || in_headings < 0) {
        return -1;
    }
    bits |= in_inline ? T_INLINE : 0;
    bits |= in_paragraph ? T_PARAGRAPH : 0;
    bits |= in_headings ? T_HEADING : 0;
    bits |= length == 1 && name[0] == 'a' ? T_LINK : 0;
    bits |= length == 4 && memcmp(name, "html", 4) == 0 ? T_TOP : 0;
    if (id < TAG_CACHE) {
        tags->cache[id] = (unsigned char)(bits | T_READ);
    }
    return bits;
}

static int has_href(LxbNode *element) {
    for (LxbAttr *attr = lxb.first_attribute(element); attr != NULL;
         attr = lxb.next_attribute(attr)) {
        size_t length = 0;
        const unsigned char *name = tree.attribute_qualified_name(attr, &length);
        if (name != NULL && length == 4 && memcmp(name, "href", 4) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A text node's bytes (none where it holds no text). */
static void text_bytes(LxbNode *node, const unsigned char **data, size_t *size) {
    LxbStr str;
    memcpy(&str, (const unsigned char *)node + tree.text_at, sizeof str);
    *data = str.data;
    *size = str.data == NULL ? 0 : str.length;
}

/* A text node's text, or NULL (no error set) when it is empty or all
   whitespace (str.isspace). */
static PyObject *text_of(LxbNode *node, int *failed) {
    LxbStr str;
    text_bytes(node, &str.data, &str.length);
    *failed = 0;
    if (str.length == 0) {
        return NULL;
    }
    int ascii = 1;
    int blank = 1;
    for (size_t i = 0; i < str.length; i++) {
        unsigned char c = str.data[i];
        if (c >= 0x80) {
            ascii = 0;
            break;
        }
        if (!is_python_space(c)) {
            blank = 0;
        }
    }
    if (ascii && blank) {
        return NULL;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)str.data, (Py_ssize_t)str.length,
                                          "replace");
    if (text == NULL) {
        *failed = 1;
        return NULL;
    }
    if (!ascii) {
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t size = PyUnicode_GET_LENGTH(text);
        blank = 1;
        for (Py_ssize_t i = 0; i < size; i++) {
            if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
                blank = 0;
                break;
            }
        }
        if (blank) {
            Py_DECREF(text);
            return NULL;
        }
    }
    return text;
}

static PyObject *address_of(LxbNode *node) { return PyLong_FromSize_t((size_t)node); }

/* Append ``text`` to paragraphs[address][which], making the entry. */
static int add_text(PyObject *paragraphs, LxbNode *paragraph, int which, PyObject *text) {
    PyObject *key = address_of(paragraph);
    if (key == NULL) {
        return -1;
    }
    PyObject *entry = PyDict_GetItemWithError(paragraphs, key);
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        entry = Py_BuildValue("([][])");
        if (entry == NULL || PyDict_SetItem(paragraphs, key, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(key);
            return -1;
        }
        Py_DECREF(entry); /* the dict holds it */
    }
    Py_DECREF(key);
    return PyList_Append(PyTuple_GET_ITEM(entry, which), text);
}

static PyObject *paragraphs_at(PyObject *module, PyObject *args) {
    size_t root_address;
    Py_ssize_t max_nodes, max_ancestors;
    Tags tags;
    (void)module;
    if (!PyArg_ParseTuple(args, "nnOOOn:paragraphs_at", &root_address, &max_nodes,
                          &tags.inline_tags, &tags.paragraph_like, &tags.headings,
                          &max_ancestors)) {
        return NULL;
    }
    if (!tree.bound || root_address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "paragraphs_at: lexbor_tree first, and an address");
        return NULL;
    }
    memset(tags.cache, 0, sizeof tags.cache);
    PyObject *paragraphs = PyDict_New();
    PyObject *headings = PyDict_New();
    if (paragraphs == NULL || headings == NULL) {
        goto failed;
    }
    LxbNode *root = (LxbNode *)root_address;
    /* LexborNode.traverse(include_text=True), its first ``max_nodes``. */
    Py_ssize_t seen = 0;
    for (LxbNode *node = root; node != NULL && seen < max_nodes;
         node = next_under(node, root), seen++) {
        if (lxb.type(node) == LXB_TEXT_NODE) {
            int error;
            PyObject *text = text_of(node, &error);
            if (error) {
                goto failed;
            }
            if (text != NULL) {
                LxbNode *parent = tree.parent(node);
                LxbNode *link = NULL;
                int bits = 0;
                for (Py_ssize_t steps = 0; parent != NULL && steps < max_ancestors; steps++) {
                    bits = tag_bits(&tags, parent);
                    if (bits < 0) {
                        Py_DECREF(text);
                        goto failed;
                    }
                    if (bits & T_LINK) {
                        if (link == NULL && has_href(parent)) {
                            link = parent;
                        }
                    } else if (!(bits & T_INLINE)) {
                        break;
                    }
                    parent = tree.parent(parent);
                }
                if (parent != NULL) {
                    bits = tag_bits(&tags, parent);
                    if (bits < 0) {
                        Py_DECREF(text);
                        goto failed;
                    }
                }
                int status = 0;
                if (parent == NULL || !(bits & T_PARAGRAPH)) {
                    if (link != NULL && parent != NULL && (bits & T_HEADING)) {
                        PyObject *key = address_of(parent);
                        PyObject *value = address_of(link);
                        status = key == NULL || value == NULL
                                     ? -1
                                     : (PyDict_SetDefault(headings, key, value) == NULL ? -1 : 0);
                        Py_XDECREF(key);
                        Py_XDECREF(value);
                    }
                } else {
                    status = add_text(paragraphs, parent, link != NULL, text);
                }
                Py_DECREF(text);
                if (status < 0) {
                    goto failed;
                }
            }
        }
    }
    return Py_BuildValue("(NN)", paragraphs, headings);
failed:
    Py_XDECREF(paragraphs);
    Py_XDECREF(headings);
    return NULL;
}

/* Characters and words of " ".join(parts) with its whitespace collapsed
   (str.split), and how many of its characters are in ``commas``. */
static int measure(PyObject *parts, Py_ssize_t *chars, Py_ssize_t *words, PyObject *commas,
                   Py_ssize_t *comma_count) {
    Py_ssize_t count = PyList_GET_SIZE(parts);
    Py_ssize_t letters = 0, runs = 0, found = 0;
    int comma_kind = commas == NULL ? 0 : PyUnicode_KIND(commas);
    const void *comma_data = commas == NULL ? NULL : PyUnicode_DATA(commas);
    Py_ssize_t comma_size = commas == NULL ? 0 : PyUnicode_GET_LENGTH(commas);
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *part = PyList_GET_ITEM(parts, p);
        if (!PyUnicode_Check(part)) {
            PyErr_SetString(PyExc_TypeError, "paragraph_scores: texts must be str");
            return -1;
        }
        int kind = PyUnicode_KIND(part);
        const void *data = PyUnicode_DATA(part);
        Py_ssize_t size = PyUnicode_GET_LENGTH(part);
        int in_word = 0;
        if (PyUnicode_IS_ASCII(part)) {
            /* The common case, a byte at a time: the commas past ASCII are
               none of its characters. */
            const unsigned char *bytes = data;
            unsigned char is_comma[128] = {0};
            for (Py_ssize_t k = 0; k < comma_size; k++) {
                Py_UCS4 c = PyUnicode_READ(comma_kind, comma_data, k);
                if (c < 128) {
                    is_comma[c] = 1;
                }
            }
            for (Py_ssize_t i = 0; i < size; i++) {
                unsigned char c = bytes[i];
                if (is_python_space(c)) {
                    in_word = 0;
                    continue;
                }
                letters++;
                runs += !in_word;
                in_word = 1;
                found += is_comma[c];
            }
            continue;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c < 128 ? is_python_space((unsigned char)c) : Py_UNICODE_ISSPACE(c)) {
                in_word = 0;
                continue;
            }
            letters++;
            if (!in_word) {
                runs++;
                in_word = 1;
            }
            for (Py_ssize_t k = 0; k < comma_size; k++) {
                if (PyUnicode_READ(comma_kind, comma_data, k) == c) {
                    found++;
                    break;
                }
            }
        }
    }
    *chars = runs ? letters + runs - 1 : 0;
    *words = runs;
    if (comma_count != NULL) {
        *comma_count = found;
    }
    return 0;
}

/* dict[key] = dict.get(key, 0) + value, for int values. */
static int add_int(PyObject *dict, PyObject *key, Py_ssize_t value) {
    PyObject *now = PyDict_GetItemWithError(dict, key);
    if (now == NULL && PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t before = now == NULL ? 0 : PyLong_AsSsize_t(now);
    if (before == -1 && PyErr_Occurred()) {
        return -1;
    }
    PyObject *sum = PyLong_FromSsize_t(before + value);
    if (sum == NULL) {
        return -1;
    }
    int status = PyDict_SetItem(dict, key, sum);
    Py_DECREF(sum);
    return status;
}

static const int dividers[5] = {1, 2, 6, 9, 12};

static PyObject *paragraph_scores(PyObject *module, PyObject *args) {
    PyObject *paragraphs, *commas;
    Py_ssize_t min_length, max_ancestors, chars_ancestors, chars_budget;
    Tags tags;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!Unnnn:paragraph_scores", &PyDict_Type, &paragraphs, &commas,
                          &min_length, &max_ancestors, &chars_ancestors, &chars_budget)) {
        return NULL;
    }
    if (!tree.bound) {
        PyErr_SetString(PyExc_RuntimeError, "paragraph_scores: lexbor_tree first");
        return NULL;
    }
    memset(tags.cache, 0, sizeof tags.cache);
    tags.inline_tags = tags.paragraph_like = tags.headings = PyFrozenSet_New(NULL);
    PyObject *scores = PyDict_New(), *direct = PyDict_New(), *own = PyDict_New();
    PyObject *chars = PyDict_New();
    if (tags.inline_tags == NULL || scores == NULL || direct == NULL || own == NULL ||
        chars == NULL) {
        goto failed;
    }
    Py_ssize_t position = 0;
    PyObject *key, *entry;
    while (PyDict_Next(paragraphs, &position, &key, &entry)) {
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
            !PyList_Check(PyTuple_GET_ITEM(entry, 0)) ||
            !PyList_Check(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "paragraph_scores: entries are (texts, links)");
            goto failed;
        }
        Py_ssize_t text_chars, link_chars, words, comma_count;
        if (measure(PyTuple_GET_ITEM(entry, 0), &text_chars, &words, commas, &comma_count) < 0 ||
            measure(PyTuple_GET_ITEM(entry, 1), &link_chars, &words, NULL, NULL) < 0) {
            goto failed;
        }
        Py_ssize_t length = text_chars + link_chars;
        if (length < min_length) {
            continue;
        }
        Py_ssize_t hundreds = length / 100 < 3 ? length / 100 : 3;
        double score = (double)((1 + comma_count + hundreds) * text_chars) / (double)length;
        PyObject *own_chars = PyLong_FromSsize_t(text_chars);
        if (own_chars == NULL || PyDict_SetItem(own, key, own_chars) < 0) {
            Py_XDECREF(own_chars);
            goto failed;
        }
        Py_DECREF(own_chars);
        size_t address = PyLong_AsSize_t(key);
        if (address == (size_t)-1 && PyErr_Occurred()) {
            goto failed;
        }
        LxbNode *parent = tree.parent((LxbNode *)address);
        if (parent == NULL) {
            continue;
        }
        PyObject *parent_key = address_of(parent);
        if (parent_key == NULL || add_int(direct, parent_key, text_chars) < 0) {
            Py_XDECREF(parent_key);
            goto failed;
        }
        Py_DECREF(parent_key);
        for (int d = 0; d < 5 && parent != NULL; d++) {
            int bits = tag_bits(&tags, parent);
            if (bits < 0) {
                goto failed;
            }
            if (bits & T_TOP) {
                break;
            }
            PyObject *ancestor = address_of(parent);
            if (ancestor == NULL) {
                goto failed;
            }
            PyObject *previous = PyDict_GetItemWithError(scores, ancestor);
            double before = previous == NULL ? 0.0 : PyFloat_AS_DOUBLE(previous);
            PyObject *sum = previous == NULL && PyErr_Occurred()
                                ? NULL
                                : PyFloat_FromDouble(before + score / dividers[d]);
            if (sum == NULL || PyDict_SetItem(scores, ancestor, sum) < 0) {
                Py_XDECREF(sum);
                Py_DECREF(ancestor);
                goto failed;
            }
            Py_DECREF(sum);
            Py_DECREF(ancestor);
            parent = tree.parent(parent);
        }
    }
    /* Paragraph text under each element, summed upwards per parent. */
    Py_ssize_t steps = 0;
    position = 0;
    PyObject *length_object;
    while (PyDict_Next(direct, &position, &key, &length_object)) {
        Py_ssize_t length = PyLong_AsSsize_t(length_object);
        if (add_int(chars, key, length) < 0) {
            goto failed;
        }
        LxbNode *ancestor = tree.parent((LxbNode *)PyLong_AsSize_t(key));
        Py_ssize_t limit = chars_ancestors < max_ancestors ? chars_ancestors : max_ancestors;
        for (Py_ssize_t i = 0; i < limit && ancestor != NULL; i++) {
            PyObject *ancestor_key = address_of(ancestor);
            if (ancestor_key == NULL || add_int(chars, ancestor_key, length) < 0) {
                Py_XDECREF(ancestor_key);
                goto failed;
            }
            Py_DECREF(ancestor_key);
            ancestor = tree.parent(ancestor);
        }
        steps += chars_ancestors;
        if (steps > chars_budget) {
            break;
        }
    }
    Py_DECREF(tags.inline_tags);
    return Py_BuildValue("(NNNN)", scores, direct, own, chars);
failed:
    Py_XDECREF(tags.inline_tags);
    Py_XDECREF(scores);
    Py_XDECREF(direct);
    Py_XDECREF(own);
    Py_XDECREF(chars);
    return NULL;
}

/* -- html._Walker.walk, in C ----------------------------------------------------- */

/* What the walk does with an element, by its tag (``walk_kind``). */
enum {
    W_SKIP,    /* a comment, the document, a node with no tag name */
    W_OTHER,   /* any other element: a container, walked into */
    W_INLINE,  /* phrasing content: its children are walked */
    W_LINK,    /* <a>: a link where it has an href, else phrasing content */
    W_VOID,    /* skipped with what it holds */
    W_BR,      /* a line break */
    W_LEAF,    /* a block of phrasing content, read in one go */
    W_HEADING, /* h1-h6 */
    W_PYTHON,  /* lists, definitions, code, tables: read by _Walker._block_at */
};
#define W_KIND 0x0f
#define W_FIGCAPTION 0x10
#define W_BLOCKQUOTE 0x20
#define W_TABLE 0x40
#define W_READ 0x80
#define W_LEVEL_SHIFT 8 /* h1-h6: the level in bits 8-10 */
#define W_LIST 0x800    /* ul, ol, menu (html_tags.LISTS) */
#define W_ORDERED 0x1000
#define W_ITEM 0x2000 /* li */

typedef struct {
    PyObject *inline_tags, *void_skip, *leaf_blocks, *headings, *python_tags, *lists;
    unsigned short cache[TAG_CACHE];
} WalkTags;

static int name_is(const unsigned char *name, size_t length, const char *word) {
    size_t n = strlen(word);
    return length == n && memcmp(name, word, n) == 0;
}

static int walk_kind(WalkTags *tags, LxbNode *node) {
    if (lxb.type(node) != LXB_ELEMENT_NODE) {
        return W_SKIP;
    }
    uintptr_t id = tree.tag_id(node);
    if (id < TAG_CACHE && tags->cache[id]) {
        return tags->cache[id] & ~W_READ;
    }
    size_t length = 0;
    const unsigned char *name = tree.qualified_name(node, &length);
    int kind = W_SKIP;
    if (name != NULL && length > 0 && name[0] != '-') {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)name, (Py_ssize_t)length, "replace");
        if (text == NULL) {
            return -1;
        }
        PyObject *level = NULL;
        int found;
        if (name_is(name, length, "a")) {
            kind = W_LINK;
        } else if ((found = PySequence_Contains(tags->inline_tags, text)) != 0) {
            kind = found < 0 ? -1 : W_INLINE;
        } else if ((found = PySequence_Contains(tags->void_skip, text)) != 0) {
            kind = found < 0 ? -1 : W_VOID;
        } else if (name_is(name, length, "br")) {
            kind = W_BR;
        } else if ((found = PySequence_Contains(tags->leaf_blocks, text)) != 0) {
            kind = found < 0 ? -1 : W_LEAF | (name_is(name, length, "figcaption") ? W_FIGCAPTION : 0);
        } else if ((level = PyDict_GetItemWithError(tags->headings, text)) != NULL) {
            long value = PyLong_AsLong(level);
            kind = value == -1 && PyErr_Occurred() ? -1 : W_HEADING | (int)(value << W_LEVEL_SHIFT);
        } else if (PyErr_Occurred()) {
            kind = -1;
        } else if ((found = PySequence_Contains(tags->python_tags, text)) != 0) {
            int listed = found < 0 ? -1 : PySequence_Contains(tags->lists, text);
            kind = listed < 0 ? -1
                              : W_PYTHON | (listed ? W_LIST : 0) |
                                    (name_is(name, length, "ol") ? W_ORDERED : 0) |
                                    (name_is(name, length, "li") ? W_ITEM : 0);
        } else if (name_is(name, length, "table")) {
            kind = W_PYTHON | W_TABLE;
        } else {
            kind = W_OTHER | (name_is(name, length, "blockquote") ? W_BLOCKQUOTE : 0);
        }
        Py_DECREF(text);
        if (kind < 0) {
            return -1;
        }
    }
    if (id < TAG_CACHE) {
        tags->cache[id] = (unsigned short)(kind | W_READ);
    }
    return kind;
}

typedef struct {
    char *data;
    size_t size, capacity;
} Buffer;

static int buffer_add(Buffer *buffer, const void *data, size_t size) {
    if (buffer->size + size > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 256;
        while (capacity < buffer->size + size) {
            capacity *= 2;
        }
        char *grown = PyMem_Realloc(buffer->data, capacity);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->size, data, size);
    buffer->size += size;
    return 0;
}

/* LexborNode.text(): the bytes of every text node under ``node``, in order. */
static int add_text_under(Buffer *buffer, LxbNode *node) {
    LxbNode *root = node;
    LxbNode *at = tree.first_child(root);
    while (at != NULL) {
        if (lxb.type(at) == LXB_TEXT_NODE) {
            const unsigned char *data;
            size_t size;
            text_bytes(at, &data, &size);
            if (size && buffer_add(buffer, data, size) < 0) {
                return -1;
            }
        }
        at = next_under(at, root);
    }
    return 0;
}

static int all_ascii(const char *data, size_t size) {
    for (size_t i = 0; i < size; i++) {
        if ((unsigned char)data[i] >= 0x80) {
            return 0;
        }
    }
    return 1;
}

/* len(_collapse(text)) of UTF-8 bytes. */
static Py_ssize_t collapsed_length(const char *data, size_t size) {
    if (all_ascii(data, size)) {
        Py_ssize_t letters = 0, runs = 0;
        int in_word = 0;
        for (size_t i = 0; i < size; i++) {
            if (is_python_space((unsigned char)data[i])) {
                in_word = 0;
            } else {
                letters++;
                runs += !in_word;
                in_word = 1;
            }
        }
        return runs ? letters + runs - 1 : 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8(data, (Py_ssize_t)size, "replace");
    if (text == NULL) {
        return -1;
    }
    PyObject *parts = PyList_New(1);
    if (parts == NULL) {
        Py_DECREF(text);
        return -1;
    }
    PyList_SET_ITEM(parts, 0, text);
    Py_ssize_t chars, words;
    int status = measure(parts, &chars, &words, NULL, NULL);
    Py_DECREF(parts);
    return status < 0 ? -1 : chars;
}

/* html_rules.join_lines([text]) of UTF-8 bytes: an ASCII text has one line,
   its whitespace collapsed here; any other is Python's to join. */
static PyObject *joined(const char *data, size_t size, PyObject *join_lines) {
    if (all_ascii(data, size)) {
        PyObject *text = PyUnicode_New((Py_ssize_t)size, 127);
        if (text == NULL) {
            return NULL;
        }
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
        Py_ssize_t length = 0;
        int in_word = 0;
        for (size_t i = 0; i < size; i++) {
            unsigned char c = (unsigned char)data[i];
            if (is_python_space(c)) {
                in_word = 0;
                continue;
            }
            if (!in_word && length) {
                out[length++] = ' ';
            }
            in_word = 1;
            out[length++] = c;
        }
        if (length == (Py_ssize_t)size) {
            return text;
        }
        PyObject *cut = PyUnicode_Substring(text, 0, length);
        Py_DECREF(text);
        return cut;
    }
    PyObject *text = PyUnicode_DecodeUTF8(data, (Py_ssize_t)size, "replace");
    if (text == NULL) {
        return NULL;
    }
    PyObject *parts = PyList_New(1);
    if (parts == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    PyList_SET_ITEM(parts, 0, text);
    PyObject *result = PyObject_CallOneArg(join_lines, parts);
    Py_DECREF(parts);
    return result;
}

typedef struct {
    PyObject *walker, *blocks, *shares, *headings, *quotes, *path, *parser;
    PyObject *block_type, *join_lines, *heading_control;
    PyObject *kinds[4]; /* "paragraph", "heading"; "\n" and " " for headings */
    Buffer parts;
    int has_parts;
    Py_ssize_t link_chars, budget;
    int limited;
} Walk;

enum { K_PARAGRAPH, K_HEADING };

static PyObject *walk_path(Walk *w) {
    if (w->path == NULL) {
        Py_ssize_t count = PyList_GET_SIZE(w->headings);
        PyObject *path = PyTuple_New(count);
        if (path == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *text = PyTuple_GET_ITEM(PyList_GET_ITEM(w->headings, i), 1);
            PyTuple_SET_ITEM(path, i, Py_NewRef(text));
        }
        w->path = path;
    }
    return w->path;
}

/* _Walker._emit: a block, unless its text is empty. Steals ``text``. */
static int walk_emit(Walk *w, PyObject *text, int kind, Py_ssize_t link_chars) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (length == 0) {
        Py_DECREF(text);
        return 0;
    }
    PyObject *path = walk_path(w);
    PyObject *block = path == NULL ? NULL
                                   : PyObject_CallFunctionObjArgs(w->block_type, text,
                                                                  w->kinds[kind], path, NULL);
    Py_DECREF(text);
    if (block == NULL) {
        return -1;
    }
    double share = (double)link_chars / (double)length;
    PyObject *share_object = PyFloat_FromDouble(share < 1.0 ? share : 1.0);
    int status = share_object == NULL || PyList_Append(w->blocks, block) < 0 ||
                         PyList_Append(w->shares, share_object) < 0
                     ? -1
                     : 0;
    Py_DECREF(block);
    Py_XDECREF(share_object);
    return status;
}

static int walk_flush(Walk *w) {
    int status = 0;
    if (w->has_parts) {
        PyObject *text = joined(w->parts.data, w->parts.size, w->join_lines);
        w->parts.size = 0;
        w->has_parts = 0;
        status = text == NULL ? -1 : walk_emit(w, text, K_PARAGRAPH, w->link_chars);
    }
    w->link_chars = 0;
    return status;
}

/* Hand Python the walk's state before calling it, and take it back after. */
static int walk_lend(Walk *w) {
    PyObject *budget = PyLong_FromSsize_t(w->budget);
    int status = budget == NULL ? -1 : PyObject_SetAttrString(w->walker, "_budget", budget);
    Py_XDECREF(budget);
    if (status == 0) {
        status = PyObject_SetAttrString(w->walker, "_path_cache", w->path ? w->path : Py_None);
    }
    if (status == 0) {
        status = PyObject_SetAttrString(w->walker, "limited", w->limited ? Py_True : Py_False);
    }
    return status;
}

static int walk_take_back(Walk *w) {
    PyObject *budget = PyObject_GetAttrString(w->walker, "_budget");
    PyObject *limited = PyObject_GetAttrString(w->walker, "limited");
    PyObject *path = PyObject_GetAttrString(w->walker, "_path_cache");
    int status = -1;
    if (budget != NULL && limited != NULL && path != NULL) {
        w->budget = PyLong_AsSsize_t(budget);
        w->limited = PyObject_IsTrue(limited);
        if (!(w->budget == -1 && PyErr_Occurred()) && w->limited >= 0) {
            Py_XSETREF(w->path, path == Py_None ? NULL : Py_NewRef(path));
            status = 0;
        }
    }
    Py_XDECREF(budget);
    Py_XDECREF(limited);
    Py_XDECREF(path);
    return status;
}

/* walker.method() or walker.method(argument), the state lent. */
static PyObject *walk_call(Walk *w, const char *method, PyObject *argument) {
    if (walk_lend(w) < 0) {
        return NULL;
    }
    PyObject *name = PyUnicode_FromString(method);
    if (name == NULL) {
        return NULL;
    }
    PyObject *result = argument == NULL
                           ? PyObject_CallMethodNoArgs(w->walker, name)
                           : PyObject_CallMethodOneArg(w->walker, name, argument);
    Py_DECREF(name);
    if (result != NULL && walk_take_back(w) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* _leaf_text: an element's text as joined lines. */
static PyObject *leaf_text(Walk *w, LxbNode *node, Buffer *scratch) {
    scratch->size = 0;
    if (add_text_under(scratch, node) < 0) {
        return NULL;
    }
    return joined(scratch->data, scratch->size, w->join_lines);
}


/* _phrase_link_chars: the collapsed text of each link in ``node``'s subtree. */
static Py_ssize_t phrase_link_chars(WalkTags *tags, LxbNode *node, Buffer *scratch) {
    Py_ssize_t total = 0;
    LxbNode *root = node, *at = node;
    while (at != NULL) {
        int kind = lxb.type(at) == LXB_TEXT_NODE ? W_SKIP : walk_kind(tags, at);
        if (kind < 0) {
            return -1;
        }
        if ((kind & W_KIND) == W_LINK && has_href(at)) {
            scratch->size = 0;
            if (add_text_under(scratch, at) < 0) {
                return -1;
            }
            Py_ssize_t chars = collapsed_length(scratch->data, scratch->size);
            if (chars < 0) {
                return -1;
            }
            total += chars;
        }
        at = next_under(at, root);
    }
    return total;
}

typedef struct {
    LxbNode *node;
    int leaving;
} Step;

/* html._WALK_RULES, read once per call. */
typedef struct {
    WalkTags tags;
    PyObject *block_type, *join_lines, *heading_control;
    PyObject *kinds[4]; /* "paragraph", "heading"; "\n" and " " for headings */
    Py_ssize_t prose_chars;
} WalkRules;

static int read_walk_rules(PyObject *rules, WalkRules *r) {
    if (!PyArg_ParseTuple(rules, "OOOO!OOOOOnOOOO:html._WALK_RULES", &r->tags.inline_tags,
                          &r->tags.void_skip, &r->tags.leaf_blocks, &PyDict_Type,
                          &r->tags.headings, &r->tags.python_tags, &r->tags.lists,
                          &r->block_type, &r->join_lines, &r->heading_control, &r->prose_chars,
                          &r->kinds[0], &r->kinds[1], &r->kinds[2], &r->kinds[3])) {
        return -1;
    }
    memset(r->tags.cache, 0, sizeof r->tags.cache);
    return 0;
}

/* Push ``node``'s children so that its first comes off the stack first,
   after ``node`` itself, to be left, when ``leaves``. */
static int push_children(Step **stack, Py_ssize_t *depth, Py_ssize_t *room, LxbNode *node,
                         int leaves) {
    Py_ssize_t children = 0;
    for (LxbNode *child = tree.first_child(node); child; child = tree.next(child)) {
        children++;
    }
    if (*depth + children + 1 > *room) {
        Py_ssize_t grown_room = *room;
        while (*depth + children + 1 > grown_room) {
            grown_room *= 2;
        }
        Step *grown = PyMem_Realloc(*stack, sizeof(Step) * (size_t)grown_room);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *stack = grown;
        *room = grown_room;
    }
    if (leaves) {
        (*stack)[(*depth)++] = (Step){node, 1};
    }
    Py_ssize_t at = *depth + children;
    for (LxbNode *child = tree.first_child(node); child; child = tree.next(child)) {
        (*stack)[--at] = (Step){child, 0};
    }
    *depth += children;
    return 0;
}

static PyObject *walk_blocks(PyObject *module, PyObject *args) {
    PyObject *walker, *parser, *rules;
    size_t root_address, end_address;
    (void)module;
    if (!PyArg_ParseTuple(args, "OOnnO!:walk_blocks", &walker, &parser, &root_address,
                          &end_address, &PyTuple_Type, &rules)) {
        return NULL;
    }
    if (!tree.bound || root_address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "walk_blocks: lexbor_tree first, and a root");
        return NULL;
    }
    WalkRules read;
    if (read_walk_rules(rules, &read) < 0) {
        return NULL;
    }
    WalkTags tags = read.tags;
    Py_ssize_t prose_chars = read.prose_chars;
    Walk w;
    memset(&w, 0, sizeof w);
    w.block_type = read.block_type;
    w.join_lines = read.join_lines;
    w.heading_control = read.heading_control;
    memcpy(w.kinds, read.kinds, sizeof w.kinds);
    w.walker = walker;
    w.parser = parser;
    Buffer scratch = {NULL, 0, 0};
    Step *stack = NULL;
    Py_ssize_t depth = 0, room = 0;
    PyObject *result = NULL;
    w.blocks = PyObject_GetAttrString(walker, "blocks");
    w.shares = PyObject_GetAttrString(walker, "link_shares");
    w.headings = PyObject_GetAttrString(walker, "_headings");
    w.quotes = PyObject_GetAttrString(walker, "_quotes");
    if (w.blocks == NULL || w.shares == NULL || w.headings == NULL || w.quotes == NULL ||
        !PyList_Check(w.blocks) || !PyList_Check(w.shares) || !PyList_Check(w.headings) ||
        !PyList_Check(w.quotes) || walk_take_back(&w) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "walk_blocks: not a _Walker");
        }
        goto done;
    }
    LxbNode *end = (LxbNode *)end_address;
    room = 64;
    stack = PyMem_Malloc(sizeof(Step) * (size_t)room);
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    stack[depth++] = (Step){(LxbNode *)root_address, 0};
    while (depth > 0 && !w.limited) {
        Step step = stack[--depth];
        LxbNode *node = step.node;
        if (step.leaving) {
            if (walk_flush(&w) < 0) {
                goto done;
            }
            int kind = walk_kind(&tags, node);
            if (kind < 0) {
                goto done;
            }
            if ((kind & W_BLOCKQUOTE) && PyList_GET_SIZE(w.quotes) > 0) {
                PyObject *closed = walk_call(&w, "_close_quote", NULL);
                if (closed == NULL) {
                    goto done;
                }
                Py_DECREF(closed);
            }
            if (node == end) {
                break;
            }
            continue;
        }
        if (--w.budget < 0) {
            w.limited = 1;
            break;
        }
        if (lxb.type(node) == LXB_TEXT_NODE) {
            const unsigned char *data;
            size_t size;
            text_bytes(node, &data, &size);
            if (size && buffer_add(&w.parts, data, size) < 0) {
                goto done;
            }
            w.has_parts = 1;
            continue;
        }
        int kind = walk_kind(&tags, node);
        if (kind < 0) {
            goto done;
        }
        int push = 0;
        switch (kind & W_KIND) {
        case W_SKIP:
        case W_VOID:
            break;
        case W_LINK:
            if (has_href(node)) {
                size_t before = w.parts.size;
                if (add_text_under(&w.parts, node) < 0) {
                    goto done;
                }
                w.has_parts = 1;
                Py_ssize_t chars = collapsed_length(w.parts.data + before, w.parts.size - before);
                if (chars < 0) {
                    goto done;
                }
                w.link_chars += chars;
                break;
            }
            push = 1;
            break;
        case W_INLINE:
            push = 1;
            break;
        case W_BR:
            if (buffer_add(&w.parts, "\xee\x80\x80", 3) < 0) { /* BREAK, U+E000 */
                goto done;
            }
            w.has_parts = 1;
            break;
        case W_LEAF: {
            if (walk_flush(&w) < 0) {
                goto done;
            }
            PyObject *text = leaf_text(&w, node, &scratch);
            if (text == NULL) {
                goto done;
            }
            if ((kind & W_FIGCAPTION) && PyUnicode_GET_LENGTH(text) < prose_chars) {
                Py_DECREF(text);
                break;
            }
            Py_ssize_t chars = phrase_link_chars(&tags, node, &scratch);
            if (chars < 0) {
                Py_DECREF(text);
                goto done;
            }
            if (walk_emit(&w, text, K_PARAGRAPH, chars) < 0) {
                goto done;
            }
            break;
        }
        case W_HEADING: {
            long level = kind >> W_LEVEL_SHIFT;
            PyObject *text = leaf_text(&w, node, &scratch);
            if (text == NULL) {
                goto done;
            }
            Py_ssize_t length = PyUnicode_GET_LENGTH(text);
            if (PyUnicode_FindChar(text, '\n', 0, length, 1) >= 0) {
                Py_SETREF(text, PyUnicode_Replace(text, w.kinds[2], w.kinds[3], -1));
                if (text == NULL) {
                    goto done;
                }
                length = PyUnicode_GET_LENGTH(text);
            }
            if (length && PyUnicode_READ_CHAR(text, length - 1) == ']') {
                PyObject *node_object = tree.new_node(node, w.parser);
                if (node_object == NULL) {
                    Py_DECREF(text);
                    goto done;
                }
                PyObject *kept = PyObject_CallFunctionObjArgs(w.heading_control, node_object,
                                                              text, NULL);
                Py_DECREF(node_object);
                Py_SETREF(text, kept);
                if (text == NULL) {
                    goto done;
                }
                length = PyUnicode_GET_LENGTH(text);
            }
            if (length == 0) {
                Py_DECREF(text);
                break;
            }
            if (walk_flush(&w) < 0) {
                Py_DECREF(text);
                goto done;
            }
            Py_ssize_t count;
            while ((count = PyList_GET_SIZE(w.headings)) > 0) {
                PyObject *last = PyTuple_GET_ITEM(PyList_GET_ITEM(w.headings, count - 1), 0);
                long last_level = PyLong_AsLong(last);
                if (last_level < level) {
                    break;
                }
                if (PyList_SetSlice(w.headings, count - 1, count, NULL) < 0) {
                    Py_DECREF(text);
                    goto done;
                }
            }
            Py_CLEAR(w.path);
            Py_INCREF(text);
            if (walk_emit(&w, text, K_HEADING, 0) < 0) {
                Py_DECREF(text);
                goto done;
            }
            PyObject *entry = Py_BuildValue("(lN)", level, text);
            if (entry == NULL || PyList_Append(w.headings, entry) < 0) {
                Py_XDECREF(entry);
                goto done;
            }
            Py_DECREF(entry);
            Py_CLEAR(w.path);
            break;
        }
        case W_PYTHON: {
            if (walk_flush(&w) < 0) {
                goto done;
            }
            PyObject *node_object = tree.new_node(node, w.parser);
            if (node_object == NULL) {
                goto done;
            }
            PyObject *handled = walk_call(&w, "_block_at", node_object);
            Py_DECREF(node_object);
            if (handled == NULL) {
                goto done;
            }
            int done_there = PyObject_IsTrue(handled);
            Py_DECREF(handled);
            if (done_there < 0) {
                goto done;
            }
            if (done_there || !(kind & W_TABLE)) {
                break;
            }
            /* A table for layout: a container. */
            push = 2;
            break;
        }
        default: /* W_OTHER */
            push = 2;
            break;
        }
        if (push == 2) {
            if (walk_flush(&w) < 0) {
                goto done;
            }
            if (kind & W_BLOCKQUOTE) {
                PyObject *path = walk_path(&w);
                PyObject *quote = path == NULL ? NULL
                                               : Py_BuildValue("(nO)", PyList_GET_SIZE(w.blocks),
                                                               path);
                if (quote == NULL || PyList_Append(w.quotes, quote) < 0) {
                    Py_XDECREF(quote);
                    goto done;
                }
                Py_DECREF(quote);
            }
        }
        if (push && push_children(&stack, &depth, &room, node, push == 2) < 0) {
            goto done;
        }
    }
    if (walk_flush(&w) < 0) {
        goto done;
    }
    while (PyList_GET_SIZE(w.quotes) > 0) {
        PyObject *closed = walk_call(&w, "_close_quote", NULL);
        if (closed == NULL) {
            goto done;
        }
        Py_DECREF(closed);
    }
    if (walk_lend(&w) < 0) {
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(stack);
    PyMem_Free(scratch.data);
    PyMem_Free(w.parts.data);
    Py_XDECREF(w.blocks);
    Py_XDECREF(w.shares);
    Py_XDECREF(w.headings);
    Py_XDECREF(w.quotes);
    Py_XDECREF(w.path);
    return result;
}

/* The number an <ol start> gives: int(value or 1), 1 where it is no int. */
static PyObject *list_start(LxbNode *element) {
    const unsigned char *value = NULL;
    size_t value_length = 0;
    for (LxbAttr *attr = lxb.first_attribute(element); attr != NULL;
         attr = lxb.next_attribute(attr)) {
        size_t length = 0;
        const unsigned char *name = tree.attribute_qualified_name(attr, &length);
        if (name != NULL && name_is(name, length, "start")) {
            value = lxb.attribute_value(attr, &value_length); /* the last wins, as in a dict */
        }
    }
    if (value == NULL || value_length == 0) {
        return PyLong_FromLong(1);
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)value, (Py_ssize_t)value_length,
                                          "replace");
    if (text == NULL) {
        return NULL;
    }
    PyObject *number = PyLong_FromUnicodeObject(text, 10);
    Py_DECREF(text);
    if (number == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        return PyLong_FromLong(1);
    }
    return number;
}

typedef struct {
    int ordered;
    PyObject *next;
} OpenList;

typedef struct {
    PyObject *lines, *marker, *join_lines, *newline, *space;
    Buffer parts;
    int indent, open;
} ListLines;

/* _Walker._list's flush: the item's text, as a line. */
static int list_flush(ListLines *l) {
    PyObject *text = joined(l->parts.data, l->parts.size, l->join_lines);
    l->parts.size = 0;
    if (text == NULL) {
        return -1;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_FindChar(text, '\n', 0, length, 1) >= 0) {
        Py_SETREF(text, PyUnicode_Replace(text, l->newline, l->space, -1));
        if (text == NULL) {
            return -1;
        }
    }
    if (PyUnicode_GET_LENGTH(text) == 0) {
        Py_DECREF(text);
        return 0;
    }
    PyObject *line;
    if (l->marker != NULL || l->open) {
        char indent[2 * 8 + 1];
        memset(indent, ' ', (size_t)(2 * l->indent));
        indent[2 * l->indent] = '\0';
        line = l->marker != NULL ? PyUnicode_FromFormat("%s%U%U", indent, l->marker, text)
                                 : PyUnicode_FromFormat("%s  %U", indent, text);
    } else {
        line = Py_NewRef(text);
    }
    Py_DECREF(text);
    if (line == NULL || PyList_Append(l->lines, line) < 0) {
        Py_XDECREF(line);
        return -1;
    }
    Py_DECREF(line);
    Py_CLEAR(l->marker);
    return 0;
}

static PyObject *list_text(PyObject *module, PyObject *args) {
    PyObject *walker, *rules;
    size_t root_address;
    (void)module;
    if (!PyArg_ParseTuple(args, "OnO!:list_text", &walker, &root_address, &PyTuple_Type,
                          &rules)) {
        return NULL;
    }
    if (!tree.bound || root_address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "list_text: lexbor_tree first, and a root");
        return NULL;
    }
    WalkRules read;
    if (read_walk_rules(rules, &read) < 0) {
        return NULL;
    }
    WalkTags tags = read.tags;
    ListLines l;
    memset(&l, 0, sizeof l);
    l.join_lines = read.join_lines;
    l.newline = read.kinds[2];
    l.space = read.kinds[3];
    PyObject *budget_object = PyObject_GetAttrString(walker, "_budget");
    if (budget_object == NULL) {
        return NULL;
    }
    Py_ssize_t budget = PyLong_AsSsize_t(budget_object);
    Py_DECREF(budget_object);
    if (budget == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int limited = 0;
    PyObject *result = NULL;
    Step *stack = NULL;
    OpenList *lists = NULL;
    Py_ssize_t depth = 0, room = 64, list_room = 8;
    l.lines = PyList_New(0);
    stack = PyMem_Malloc(sizeof(Step) * (size_t)room);
    lists = PyMem_Malloc(sizeof(OpenList) * (size_t)list_room);
    if (l.lines == NULL || stack == NULL || lists == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    stack[depth++] = (Step){(LxbNode *)root_address, 0};
    while (depth > 0) {
        Step step = stack[--depth];
        LxbNode *node = step.node;
        unsigned int type = lxb.type(node);
        int kind = type == LXB_ELEMENT_NODE ? walk_kind(&tags, node) : W_SKIP;
        if (kind < 0) {
            goto done;
        }
        if (step.leaving) {
            if (list_flush(&l) < 0) {
                goto done;
            }
            if ((kind & W_LIST) && l.open > 0) {
                l.open--;
                Py_DECREF(lists[l.open].next);
            } else if (kind & W_ITEM) {
                Py_CLEAR(l.marker);
            }
            continue;
        }
        if (--budget < 0) {
            limited = 1;
            break;
        }
        if (type == LXB_TEXT_NODE) {
            const unsigned char *data;
            size_t size;
            text_bytes(node, &data, &size);
            if (size && buffer_add(&l.parts, data, size) < 0) {
                goto done;
            }
            continue;
        }
        if (type != LXB_ELEMENT_NODE || (kind & W_KIND) == W_VOID) {
            continue;
        }
        int leaves = 1;
        if ((kind & W_KIND) == W_INLINE || (kind & W_KIND) == W_LINK) {
            leaves = 0;
        } else {
            if (list_flush(&l) < 0) {
                goto done;
            }
            if (kind & W_LIST) {
                if (l.open == list_room) {
                    list_room *= 2;
                    OpenList *grown = PyMem_Realloc(lists, sizeof(OpenList) * (size_t)list_room);
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    lists = grown;
                }
                PyObject *start = list_start(node);
                if (start == NULL) {
                    goto done;
                }
                lists[l.open++] = (OpenList){(kind & W_ORDERED) != 0, start};
            } else if (kind & W_ITEM) {
                int level = l.open - 1 > 0 ? l.open - 1 : 0;
                l.indent = level < 8 ? level : 8;
                Py_CLEAR(l.marker);
                if (l.open > 0 && lists[l.open - 1].ordered) {
                    OpenList *list = &lists[l.open - 1];
                    l.marker = PyUnicode_FromFormat("%S. ", list->next);
                    PyObject *one = PyLong_FromLong(1);
                    PyObject *next = one == NULL ? NULL : PyNumber_Add(list->next, one);
                    Py_XDECREF(one);
                    if (l.marker == NULL || next == NULL) {
                        Py_XDECREF(next);
                        goto done;
                    }
                    Py_SETREF(list->next, next);
                } else {
                    l.marker = PyUnicode_FromString("- ");
                    if (l.marker == NULL) {
                        goto done;
                    }
                }
            }
        }
        if (push_children(&stack, &depth, &room, node, leaves) < 0) {
            goto done;
        }
    }
    if (list_flush(&l) < 0) {
        goto done;
    }
    PyObject *left = PyLong_FromSsize_t(budget);
    if (left == NULL || PyObject_SetAttrString(walker, "_budget", left) < 0 ||
        (limited && PyObject_SetAttrString(walker, "limited", Py_True) < 0)) {
        Py_XDECREF(left);
        goto done;
    }
    Py_DECREF(left);
    PyObject *separator = PyUnicode_FromString("\n");
    if (separator != NULL) {
        result = PyUnicode_Join(separator, l.lines);
        Py_DECREF(separator);
    }
done:
    if (lists != NULL) {
        for (int i = 0; i < l.open; i++) {
            Py_DECREF(lists[i].next);
        }
    }
    PyMem_Free(lists);
    PyMem_Free(stack);
    PyMem_Free(l.parts.data);
    Py_XDECREF(l.lines);
    Py_XDECREF(l.marker);
    return result;
}

/* html._Elements: the elements under ``root`` (itself included) whose tag is
   one of ``wanted``, in document order, as (tag, LexborNode). */
static PyObject *elements_at(PyObject *module, PyObject *args) {
    PyObject *parser, *wanted;
    size_t root_address;
    (void)module;
    if (!PyArg_ParseTuple(args, "OnO:elements_at", &parser, &root_address, &wanted)) {
        return NULL;
    }
    if (!tree.bound || root_address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "elements_at: lexbor_tree first, and a root");
        return NULL;
    }
    /* Per tag id: 0 not read yet, 1 not wanted, 2 wanted (its name in names). */
    unsigned char seen[TAG_CACHE];
    PyObject *names[TAG_CACHE];
    memset(seen, 0, sizeof seen);
    PyObject *found = PyList_New(0);
    if (found == NULL) {
        return NULL;
    }
    LxbNode *root = (LxbNode *)root_address;
    LxbNode *node = root;
    int failed = 0;
    while (node != NULL && !failed) {
        if (lxb.type(node) == LXB_ELEMENT_NODE) {
            uintptr_t id = tree.tag_id(node);
            PyObject *name = NULL; /* a new reference when wanted */
            if (id < TAG_CACHE && seen[id]) {
                name = seen[id] == 2 ? Py_NewRef(names[id]) : NULL;
            } else {
                size_t length = 0;
                const unsigned char *raw = tree.qualified_name(node, &length);
                int in = 0;
                if (raw != NULL) {
                    name = PyUnicode_DecodeUTF8((const char *)raw, (Py_ssize_t)length, "replace");
                    in = name == NULL ? -1 : PySequence_Contains(wanted, name);
                }
                if (in < 0) {
                    Py_XDECREF(name);
                    failed = 1;
                    break;
                }
                if (!in) {
                    Py_CLEAR(name);
                }
                if (id < TAG_CACHE) {
                    seen[id] = in ? 2 : 1;
                    if (in) {
                        PyUnicode_InternInPlace(&name);
                        names[id] = name; /* borrowed from the list below, which holds it */
                    }
                }
            }
            if (name != NULL) {
                PyObject *element = tree.new_node(node, parser);
                PyObject *pair = element == NULL ? NULL : PyTuple_Pack(2, name, element);
                Py_XDECREF(element);
                if (pair == NULL || PyList_Append(found, pair) < 0) {
                    Py_XDECREF(pair);
                    Py_DECREF(name);
                    failed = 1;
                    break;
                }
                Py_DECREF(pair);
                Py_DECREF(name);
            }
        }
        node = next_under(node, root);
    }
    if (failed) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

/* Whether one of the first ``steps`` ancestors of the node at ``address`` is
   at one of ``addresses`` (a set): any(p.mem_id in addresses for p in
   islice(html._ancestors(node), steps)). */
static PyObject *ancestor_in(PyObject *module, PyObject *args) {
    size_t address;
    PyObject *addresses;
    Py_ssize_t steps;
    (void)module;
    if (!PyArg_ParseTuple(args, "nO!n:ancestor_in", &address, &PySet_Type, &addresses, &steps)) {
        return NULL;
    }
    if (!tree.bound || address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "ancestor_in: lexbor_tree first, and an address");
        return NULL;
    }
    LxbNode *parent = tree.parent((LxbNode *)address);
    for (Py_ssize_t i = 0; i < steps && parent != NULL; i++) {
        PyObject *key = address_of(parent);
        int in = key == NULL ? -1 : PySet_Contains(addresses, key);
        Py_XDECREF(key);
        if (in < 0) {
            return NULL;
        }
        if (in) {
            Py_RETURN_TRUE;
        }
        parent = tree.parent(parent);
    }
    Py_RETURN_FALSE;
}

/* Code points of UTF-8 bytes as LexborNode.text() decodes them. */
static Py_ssize_t decoded_length(Buffer *buffer) {
    if (all_ascii(buffer->data, buffer->size)) {
        return (Py_ssize_t)buffer->size;
    }
    PyObject *text = PyUnicode_DecodeUTF8(buffer->data, (Py_ssize_t)buffer->size, "replace");
    if (text == NULL) {
        return -1;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    Py_DECREF(text);
    return length;
}

static int has_href_named(LxbNode *element) {
    /* As the CSS selector [href] reads it: by local name (xlink:href too). */
    for (LxbAttr *attr = lxb.first_attribute(element); attr != NULL;
         attr = lxb.next_attribute(attr)) {
        size_t length = 0;
        const unsigned char *name = lxb.attribute_name(attr, &length);
        if (name != NULL && name_is(name, length, "href")) {
            return 1;
        }
    }
    return 0;
}

/* The length of each link's text under ``root`` (as the CSS selector
   a[href] finds them, ``root`` included), summed; each link's whitespace
   collapsed first with ``collapsed``; -1 on an error. */
static Py_ssize_t links_under(LxbNode *root, int collapsed, Buffer *buffer) {
    Py_ssize_t linked = 0;
    for (LxbNode *at = root; at != NULL; at = next_under(at, root)) {
        if (lxb.type(at) != LXB_ELEMENT_NODE) {
            continue;
        }
        size_t length = 0;
        const unsigned char *name = tree.qualified_name(at, &length);
        if (name != NULL && name_is(name, length, "a") && has_href_named(at)) {
            buffer->size = 0;
            if (add_text_under(buffer, at) < 0) {
                return -1;
            }
            Py_ssize_t chars = collapsed ? collapsed_length(buffer->data, buffer->size)
                                         : decoded_length(buffer);
            if (chars < 0) {
                return -1;
            }
            linked += chars;
        }
    }
    return linked;
}

static LxbNode *node_at(PyObject *args, const char *format) {
    size_t address;
    if (!PyArg_ParseTuple(args, format, &address)) {
        return NULL;
    }
    if (!tree.bound || address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "lexbor_tree first, and an address");
        return NULL;
    }
    return (LxbNode *)address;
}

/* html._LinkDensity: (len(node.text()), the len(link.text()) of each of
   node.css("a[href]"), itself included, summed). */
static PyObject *link_chars_at(PyObject *module, PyObject *args) {
    (void)module;
    LxbNode *root = node_at(args, "n:link_chars_at");
    if (root == NULL) {
        return NULL;
    }
    Buffer buffer = {NULL, 0, 0};
    Py_ssize_t total = -1, linked = 0;
    if (add_text_under(&buffer, root) < 0 || (total = decoded_length(&buffer)) < 0 ||
        (total > 0 && (linked = links_under(root, 0, &buffer)) < 0)) {
        PyMem_Free(buffer.data);
        return NULL;
    }
    PyMem_Free(buffer.data);
    return Py_BuildValue("(nn)", total, linked);
}

/* len(node.text()) of an element, without making the text. */
static PyObject *text_length(PyObject *module, PyObject *args) {
    (void)module;
    LxbNode *root = node_at(args, "n:text_length");
    if (root == NULL) {
        return NULL;
    }
    Buffer buffer = {NULL, 0, 0};
    Py_ssize_t total = -1;
    if (lxb.type(root) == LXB_TEXT_NODE) {
        const unsigned char *data;
        size_t size;
        text_bytes(root, &data, &size);
        if (size && buffer_add(&buffer, data, size) < 0) {
            return NULL;
        }
    } else if (add_text_under(&buffer, root) < 0) {
        PyMem_Free(buffer.data);
        return NULL;
    }
    total = decoded_length(&buffer);
    PyMem_Free(buffer.data);
    return total < 0 ? NULL : PyLong_FromSsize_t(total);
}

/* html._link_chars: len(_collapse(link.text())) of each of node.css("a[href]"). */
static PyObject *collapsed_link_chars(PyObject *module, PyObject *args) {
    (void)module;
    LxbNode *root = node_at(args, "n:collapsed_link_chars");
    if (root == NULL) {
        return NULL;
    }
    Buffer buffer = {NULL, 0, 0};
    Py_ssize_t linked = links_under(root, 1, &buffer);
    PyMem_Free(buffer.data);
    return linked < 0 ? NULL : PyLong_FromSsize_t(linked);
}

/* html._marked_elements in one walk: the first ``most`` elements under
   ``root`` (itself included) that the CSS selector _ATTRIBUTE_SELECTOR finds
   (one of the attributes evidence_at reads, a tag not in ``never``), each
   with its evidence where it has one, as (LexborNode, evidence); evidence
   NotImplemented is Python's to read. */
static PyObject *marked_at(PyObject *module, PyObject *args) {
    PyObject *parser, *never, *rules, *roles, *itemprops;
    size_t root_address;
    Py_ssize_t most;
    (void)module;
    if (!PyArg_ParseTuple(args, "OnOnO!O!O!:marked_at", &parser, &root_address, &never, &most,
                          &PyTuple_Type, &rules, &PyTuple_Type, &roles, &PyTuple_Type,
                          &itemprops)) {
        return NULL;
    }
    if (!tree.bound || root_address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "marked_at: lexbor_tree first, and a root");
        return NULL;
    }
    if (read_rules(rules) < 0) {
        return NULL;
    }
    unsigned char kept_out[TAG_CACHE]; /* per tag id: 0 not read, 1 never, 2 looked at */
    memset(kept_out, 0, sizeof kept_out);
    PyObject *found = PyList_New(0);
    if (found == NULL) {
        return NULL;
    }
    Attributes read;
    Py_ssize_t candidates = 0;
    LxbNode *root = (LxbNode *)root_address;
    for (LxbNode *node = root; node != NULL;) {
        if (lxb.type(node) == LXB_ELEMENT_NODE) {
            read_attributes(node, &read);
            int any = 0;
            for (int i = 0; i < A_COUNT; i++) {
                any |= read.present[i];
            }
            int looked_at = 0;
            if (any) {
                uintptr_t id = tree.tag_id(node);
                if (id < TAG_CACHE && kept_out[id]) {
                    looked_at = kept_out[id] == 2;
                } else {
                    size_t length = 0;
                    const unsigned char *name = tree.qualified_name(node, &length);
                    PyObject *tag = name == NULL ? NULL
                                                 : PyUnicode_DecodeUTF8((const char *)name,
                                                                        (Py_ssize_t)length,
                                                                        "replace");
                    int in = tag == NULL ? -1 : PySequence_Contains(never, tag);
                    Py_XDECREF(tag);
                    if (in < 0) {
                        Py_DECREF(found);
                        return NULL;
                    }
                    looked_at = !in;
                    if (id < TAG_CACHE) {
                        kept_out[id] = looked_at ? 2 : 1;
                    }
                }
            }
            if (looked_at) {
                if (++candidates > most) {
                    break;
                }
                PyObject *evidence = evidence_of(&read, roles, itemprops);
                if (evidence == NULL) {
                    Py_DECREF(found);
                    return NULL;
                }
                if (evidence != Py_None) {
                    PyObject *element = tree.new_node(node, parser);
                    PyObject *pair = element == NULL ? NULL : PyTuple_Pack(2, element, evidence);
                    Py_XDECREF(element);
                    if (pair == NULL || PyList_Append(found, pair) < 0) {
                        Py_XDECREF(pair);
                        Py_DECREF(evidence);
                        Py_DECREF(found);
                        return NULL;
                    }
                    Py_DECREF(pair);
                }
                Py_DECREF(evidence);
            }
        }
        node = next_under(node, root);
    }
    return found;
}

static PyMethodDef methods[] = {
    {"words", find_words, METH_VARARGS,
     "words(texts, prefixes, stopwords): for each text, (starts, ends, words, wide): its "
     "ASCII words that start as a prefix does, lower-cased, stop words left out, and the "
     "words with a letter past ASCII as [start, end, start, end, ...]; None for a text "
     "that may hold CJK."},
    {"count_tokens", count_tokens, METH_VARARGS,
     "count_tokens(text, stopwords): how many tokens the index's English analyzer, less "
     "its stemmer, yields for an ASCII text; None for any other text."},
    {"choose", choose, METH_VARARGS,
     "choose(found, stems, terms): for each text of ``found`` ((starts, ends, words, keys) "
     "or None), its matches (starts, ends, keys) under the analysis whose ``terms`` hold "
     "most of its words' ``stems`` (the first on a tie); ([], [], None) when none does."},
    {"fragment", fragment, METH_VARARGS,
     "fragment(text, starts, ends, max_chars, words): fragments.fragment_html, the "
     "matches' words given."},
    {"name_evidence", name_evidence, METH_VARARGS,
     "name_evidence(names, rules): html_rules._read_names for an ASCII id and class "
     "(``rules``: html_rules._NAME_RULES); NotImplemented for any other."},
    {"markup_depth", markup_depth, METH_VARARGS,
     "markup_depth(text, flat, raw): the most tags open at once in ``text``, the ``flat`` "
     "ones (lower-case ASCII names, in a tuple) not counted, nor any inside a ``raw`` element "
     "or a comment (html_rules.limit_markup)."},
    {"markup_attributes", markup_attributes, METH_VARARGS,
     "markup_attributes(text, raw, foreign): the most attributes one tag in ``text`` holds, "
     "its tags, comments and ``raw`` elements' text read as the HTML tokenizer reads them "
     "(raw text inside a ``foreign`` element is markup) (html_rules.limit_markup)."},
    {"lexbor_bind", lexbor_bind, METH_VARARGS,
     "lexbor_bind(path): bind the tree functions of selectolax's loaded Lexbor module at "
     "``path``; whether they could be."},
    {"evidence_at", evidence_at, METH_VARARGS,
     "evidence_at(addresses, rules, roles, itemprops): html_rules.boilerplate_evidence of "
     "the elements at these addresses (LexborNode.mem_id); NotImplemented where Python "
     "must read one."},
    {"lexbor_tree", lexbor_tree, METH_VARARGS,
     "lexbor_tree(path, LexborNode, text_address, text): bind the rest of Lexbor's tree "
     "functions and selectolax's LexborNode.new, finding where the text node at "
     "``text_address`` (its text: ``text``, UTF-8) keeps it; whether they could be."},
    {"lexbor_node", lexbor_node, METH_VARARGS,
     "lexbor_node(parser, address): the LexborNode of ``parser``'s tree at ``address`` "
     "(a mem_id this module gave for that tree, while it is unchanged)."},
    {"paragraphs_at", paragraphs_at, METH_VARARGS,
     "paragraphs_at(root, max_nodes, inline, paragraph_like, headings, max_ancestors): "
     "html._paragraphs, read in C: ({paragraph: (texts, link texts)}, {heading: link}) "
     "by address."},
    {"paragraph_scores", paragraph_scores, METH_VARARGS,
     "paragraph_scores(paragraphs, commas, min_length, max_ancestors, chars_ancestors, "
     "chars_budget): html._paragraph_scores, read in C: (scores, direct, own, chars) by "
     "address."},
    {"walk_blocks", walk_blocks, METH_VARARGS,
     "walk_blocks(walker, parser, root, stop_after, rules): html._Walker.walk of the element "
     "at ``root`` (``stop_after``: an address, or 0), into the walker's blocks; lists, "
     "definitions, code and tables are its _block_at's (``rules``: html._WALK_RULES)."},
    {"list_text", list_text, METH_VARARGS,
     "list_text(walker, root, rules): html._Walker._list of the element at ``root``, "
     "spending the walker's node budget (``rules``: html._WALK_RULES)."},
    {"elements_at", elements_at, METH_VARARGS,
     "elements_at(parser, root, wanted): html._Elements: the elements at and under ``root`` "
     "whose tag is one of ``wanted``, in document order, as (tag, LexborNode)."},
    {"ancestor_in", ancestor_in, METH_VARARGS,
     "ancestor_in(address, addresses, steps): whether one of the first ``steps`` ancestors "
     "of the node at ``address`` is at one of ``addresses`` (a set)."},
    {"text_length", text_length, METH_VARARGS,
     "text_length(address): len(node.text()) of the node at ``address``, counted without "
     "making the text."},
    {"link_chars_at", link_chars_at, METH_VARARGS,
     "link_chars_at(address): the element's text length, and its links' (a[href], itself "
     "included) summed (html._LinkDensity)."},
    {"collapsed_link_chars", collapsed_link_chars, METH_VARARGS,
     "collapsed_link_chars(address): the element's links' (a[href], itself included) text "
     "lengths, whitespace collapsed, summed (html._link_chars)."},
    {"marked_at", marked_at, METH_VARARGS,
     "marked_at(parser, root, never, most, rules, roles, itemprops): html._marked_elements "
     "in one walk: (LexborNode, evidence) for each element with evidence among the first "
     "``most`` the attribute selector finds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "researchstore._speedups",
    "Hot loops in C (optional; see speedups.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    init_codes();
    return PyModule_Create(&module);
}
