"""Build the optional C speedups; everything else is in pyproject.toml.

``researchstore._speedups`` (snippets' word search and window, counting an
ASCII text's tokens, the bound on a page's attributes) is built where a C
compiler is at hand; it uses nothing but Python's C API. Where it is not,
the build goes on without it (``optional=True``) and researchstore takes the
same steps in Python (``researchstore/speedups.py``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "researchstore._speedups",
            sources=["researchstore/_speedups.c"],
            optional=True,
        )
    ]
)
