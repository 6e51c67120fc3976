"""Build the optional C speedups; everything else is in pyproject.toml.

``researchstore._speedups`` (snippets' word search and window, counting an
ASCII text's tokens) is built where a C compiler is at hand. Where it is not,
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
