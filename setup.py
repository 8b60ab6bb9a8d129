"""The compiled twins of a few hot paths (C, against CPython's API). Everything else is in
pyproject.toml. Each extension is optional: without a compiler the install goes on and the code
runs its pure-Python reference, which stays the definition of behaviour (contracts/_native.py)."""

from setuptools import Extension, setup

#: each entry: the module's import name and its one C source, beside the Python it stands in for
NATIVE: list[tuple[str, str]] = [
    ("wirecheck.contracts._sse_c", "contracts/_sse_c.c"),
    ("wirecheck.contracts._assembly_c", "contracts/_assembly_c.c"),
    ("wirecheck.contracts._markup_c", "contracts/_markup_c.c"),
    ("wirecheck.contracts._json_c", "contracts/_json_c.c"),
    ("wirecheck.record._rows_c", "record/_rows_c.c"),
    ("wirecheck.record._window_c", "record/_window_c.c"),
    ("wirecheck.proxy._kin_c", "proxy/_kin_c.c"),
    ("wirecheck.proxy._heads_c", "proxy/_heads_c.c"),
    ("wirecheck.proxy._relay_c", "proxy/_relay_c.c"),
]

setup(
    ext_modules=[
        Extension(name, [source], optional=True, extra_compile_args=["-O2", "-std=c11", "-Wall", "-Werror"])
        for name, source in NATIVE
    ]
)
