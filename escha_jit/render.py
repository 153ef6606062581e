"""Render Jinja HIP templates for a KernelSpec (torch-free).

Templates are thin: ``templates/<op>.hip.j2`` sets constants and instantiates; device code lives
in ``templates/include/escha/*.h``. Rendering uses StrictUndefined so a missing parameter is an
error, never an empty string in C++.
"""
from __future__ import annotations

import functools
import hashlib
import os
from typing import Any, Mapping

import jinja2

from .spec import KernelSpec
from .trellis import codebook_id, is_half_rate, tile_words

TEMPLATE_SUFFIX = ".hip.j2"


def package_data_dir(name: str) -> str:
    """Directory of the package data ``name`` ("templates" or "tuning") of the imported package:
    ``escha_jit/<name>`` when it was installed from a wheel, else ``<checkout>/<name>`` beside the
    package (a source checkout, an editable install, or a tree copied for an A/B run: each uses its
    own files, never those of another checkout an editable install points at)."""
    package = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package, name)
    return installed if os.path.isdir(installed) else os.path.join(os.path.dirname(package), name)


@functools.lru_cache(maxsize=1)
def templates_dir() -> str:
    return package_data_dir("templates")


def include_dir() -> str:
    return os.path.join(templates_dir(), "include")


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir()), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=1)
def headers_digest() -> str:
    """sha256 over every header the templates may include (part of every cache key)."""
    h = hashlib.sha256()
    root = include_dir()
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def spec_context(spec: KernelSpec) -> dict[str, Any]:
    """Template variables derived from a spec; ops add their own on top."""
    ctx: dict[str, Any] = {"spec": spec, "kernel_name": spec.kernel_name(), "arch": spec.arch,
                           "vendor": spec.vendor, "in_dtype": spec.in_dtype, "out_dtype": spec.out_dtype}
    if spec.K is not None:
        ctx.update(K=spec.K, KA=int(spec.K), half_rate=is_half_rate(spec.K), W=tile_words(spec.K),
                   K2=int(round(2 * spec.K)))
    if spec.codebook is not None:
        ctx.update(codebook=spec.codebook, codebook_id=codebook_id(spec.codebook))
    ctx.update(spec.params)
    return ctx


def render(spec: KernelSpec, extra: Mapping[str, Any] | None = None) -> str:
    """The complete source of ``spec`` (headers are #included from :func:`include_dir`)."""
    template = _env().get_template(spec.op + TEMPLATE_SUFFIX)
    ctx = spec_context(spec)
    if extra:
        ctx.update(extra)
    return template.render(**ctx)
