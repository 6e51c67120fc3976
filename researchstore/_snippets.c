/* The words of texts written in ASCII words that a query's terms may match:
 * the hot loop of snippets (highlight.py), in C.
 *
 * Optional: researchstore works without it (highlight.py falls back to the
 * same search in Python), and tests check the two give the same words.
 *
 *   ascii_words(texts, prefixes, stopwords)
 *       -> [(starts, ends, words) or None for each text]
 *
 * A text with a letter or digit past ASCII gets None: its words are folded as
 * the index folds them, which is Python's (Tantivy's) to do. In every other
 * text a word is a run of ASCII letters and digits (the index's simple
 * tokenizer: whatever else is there splits words), lower-cased. A word is kept when
 *   - its first three letters are one of ``prefixes`` and it is at most
 *     LONGEST letters long (a longer one the index drops), or
 *   - it starts with one of the ``prefixes`` shorter than three letters and
 *     is at most SHORT_MOST letters long,
 * and it is not one of ``stopwords``. Prefixes that are not three letters or
 * fewer of [a-z0-9] cannot start an ASCII word and are passed over.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* highlight.py's _LONGEST - 1 (the index drops a token of 40 bytes). */
#define LONGEST 39
/* highlight.py's _PREFIX + _SHORT_TAIL. */
#define SHORT_MOST 5
/* Letters and digits, numbered 0..35 (36: any other byte). */
#define SYMBOLS 36

static signed char code_of[256];

typedef struct {
    unsigned char one[SYMBOLS];
    unsigned char two[SYMBOLS * SYMBOLS];
    unsigned char three[SYMBOLS * SYMBOLS * SYMBOLS];
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
                    table->three[(codes[0] * SYMBOLS + codes[1]) * SYMBOLS + codes[2]] = 1;
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
    if (length >= 3 && table->three[(codes[0] * SYMBOLS + codes[1]) * SYMBOLS + codes[2]]) {
        return 1;
    }
    if (length > SHORT_MOST || !table->any_short) {
        return 0;
    }
    return table->one[codes[0]] || (length >= 2 && table->two[codes[0] * SYMBOLS + codes[1]]);
}

/* Whether the character at ``i`` is an ASCII letter or digit. */
static inline int is_symbol(int kind, const void *data, Py_ssize_t i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    return c < 128 && code_of[c] >= 0;
}

/* Whether a text has a letter or digit past ASCII (its words are Python's to find). */
static int has_wide_word(PyObject *text) {
    if (PyUnicode_IS_ASCII(text)) {
        return 0;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 127 && Py_UNICODE_ISALNUM(c)) {
            return 1;
        }
    }
    return 0;
}

/* The (starts, ends, words) of one text whose words are all ASCII; NULL with
 * an exception on error. */
static PyObject *text_words(PyObject *text, const Prefixes *table, PyObject *stopwords) {
    PyObject *starts = PyList_New(0);
    PyObject *ends = PyList_New(0);
    PyObject *words = PyList_New(0);
    if (starts == NULL || ends == NULL || words == NULL) {
        goto error;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_ssize_t at = 0;
    int codes[3];
    while (at < size) {
        if (!is_symbol(kind, data, at)) {
            at++;
            continue;
        }
        Py_ssize_t start = at;
        while (at < size && is_symbol(kind, data, at)) {
            at++;
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
            goto error;
        }
        unsigned char *out = PyUnicode_1BYTE_DATA(word);
        for (Py_ssize_t i = 0; i < length; i++) {
            unsigned char c = (unsigned char)PyUnicode_READ(kind, data, start + i);
            out[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        int stop = PySet_Contains(stopwords, word);
        if (stop < 0) {
            Py_DECREF(word);
            goto error;
        }
        if (stop) {
            Py_DECREF(word);
            continue;
        }
        PyObject *first = PyLong_FromSsize_t(start);
        PyObject *last = PyLong_FromSsize_t(at);
        int failed = first == NULL || last == NULL || PyList_Append(starts, first) < 0 ||
                     PyList_Append(ends, last) < 0 || PyList_Append(words, word) < 0;
        Py_XDECREF(first);
        Py_XDECREF(last);
        Py_DECREF(word);
        if (failed) {
            goto error;
        }
    }
    PyObject *found = PyTuple_Pack(3, starts, ends, words);
    Py_DECREF(starts);
    Py_DECREF(ends);
    Py_DECREF(words);
    return found;
error:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(words);
    return NULL;
}

static PyObject *ascii_words(PyObject *module, PyObject *args) {
    PyObject *texts, *prefixes, *stopwords;
    if (!PyArg_ParseTuple(args, "O!OO!:ascii_words", &PyList_Type, &texts, &prefixes,
                          &PyFrozenSet_Type, &stopwords)) {
        return NULL;
    }
    Prefixes *table = PyMem_Malloc(sizeof(Prefixes));
    if (table == NULL) {
        return PyErr_NoMemory();
    }
    if (read_prefixes(prefixes, table) < 0) {
        PyMem_Free(table);
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(texts);
    PyObject *result = PyList_New(count);
    if (result == NULL) {
        PyMem_Free(table);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts must be strings");
            Py_DECREF(result);
            PyMem_Free(table);
            return NULL;
        }
        if (has_wide_word(text)) {
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
            continue;
        }
        PyObject *found = text_words(text, table, stopwords);
        if (found == NULL) {
            Py_DECREF(result);
            PyMem_Free(table);
            return NULL;
        }
        PyList_SET_ITEM(result, i, found);
    }
    PyMem_Free(table);
    return result;
}

static PyMethodDef methods[] = {
    {"ascii_words", ascii_words, METH_VARARGS,
     "ascii_words(texts, prefixes, stopwords): each text's words that start as a prefix "
     "does, as (starts, ends, words lower-cased), stop words left out; None for a text "
     "with a letter or digit past ASCII."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "researchstore._snippets",
    "Snippets' word search over ASCII texts, in C (optional; see highlight.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__snippets(void) {
    init_codes();
    return PyModule_Create(&module);
}
