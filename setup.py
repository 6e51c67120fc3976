"""Build the optional C speedups; everything else is in pyproject.toml.

``researchstore._snippets`` (snippets' word search) is built where a C
compiler is at hand. Where it is not, the build goes on without it
(``optional=True``) and researchstore uses the same search written in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "researchstore._snippets",
            sources=["researchstore/_snippets.c"],
            optional=True,
        )
    ]
)
