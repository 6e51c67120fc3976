/* Hot loops in C: snippets' (highlight.py, fragments.py), counting an ASCII
 * text's tokens (analysis.count_tokens) and the bound on a page's attributes
 * (html_rules.limit_markup). Each is kept for a gain a user sees: the time a
 * search takes for its snippets, an ingest for its pages (speedups.py).
 * Nothing here reads another module's structures: Python's C API only.
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
 *   markup_attributes(text, raw, foreign) -> int
 *
 * html_rules.limit_markup's bound on attributes: the most one tag holds.
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

/* -- markup_attributes: how many attributes a page's tags carry ----------------- */

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
    {"markup_attributes", markup_attributes, METH_VARARGS,
     "markup_attributes(text, raw, foreign): the most attributes one tag in ``text`` holds, "
     "its tags, comments and ``raw`` elements' text read as the HTML tokenizer reads them "
     "(raw text inside a ``foreign`` element is markup) (html_rules.limit_markup)."},
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
