"""Which sources a measurement ran: a digest of the package's kernel-relevant files, and the git
commit when the tree has trustworthy git metadata (torch-free).

Benchmarks record both. The digest is the one that identifies a tree: a copy of a checkout made
for a GPU machine may carry stale git metadata or none (the ``commit`` field then names the wrong
tree or reads ``unknown``), while the digest of a given commit's files is the same everywhere and
can be recomputed later (``git worktree add /tmp/t <rev>`` and ``escha-jit info`` there).
"""
from __future__ import annotations

import hashlib
import os
import subprocess

from .render import package_data_dir

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _source_files() -> list[tuple[str, str]]:
    """(label, path) of every file the digest covers: the package's Python modules, every file
    under the templates directory and the shipped tuning tables, in a fixed order."""
    out = []
    for label, root, keep in (("escha_jit", PACKAGE_DIR, lambda n: n.endswith(".py")),
                              ("templates", package_data_dir("templates"), lambda n: True),
                              ("tuning", package_data_dir("tuning"), lambda n: n.endswith(".json"))):
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != "__pycache__" and not (label == "escha_jit" and x in ("templates", "tuning"))]
            for n in files:
                if keep(n):
                    p = os.path.join(d, n)
                    out.append((f"{label}/{os.path.relpath(p, root)}", p))
    return sorted(out)


def source_digest() -> str:
    """First 12 hex digits of SHA-256 over (relative path, contents) of the package's Python
    modules, templates and shipped tuning tables: equal for any copy of one tree."""
    h = hashlib.sha256()
    for label, path in _source_files():
        with open(path, "rb") as f:
            data = f.read()
        h.update(label.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()[:12]


def git_commit() -> str:
    """``git describe --always --dirty`` of the checkout the package sits in, or "unknown"."""
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True,
                           text=True, cwd=PACKAGE_DIR, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
