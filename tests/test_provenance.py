"""escha_jit.provenance: the source digest identifies a tree's files, wherever the tree sits."""
import os
import shutil
import subprocess
import sys

from escha_jit import provenance

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def digest_of(tree: str) -> str:
    env = {**os.environ, "PYTHONPATH": tree}
    r = subprocess.run([sys.executable, "-c", "from escha_jit.provenance import source_digest; print(source_digest())"],
                       capture_output=True, text=True, env=env, cwd=tree, check=True)
    return r.stdout.strip()


def copy_tree(dst: str, with_pyproject: bool) -> str:
    for name in ("escha_jit", "templates", "tuning"):
        shutil.copytree(os.path.join(REPO, name), os.path.join(dst, name),
                        ignore=shutil.ignore_patterns("__pycache__"))
    if with_pyproject:
        shutil.copy(os.path.join(REPO, "pyproject.toml"), dst)
    return dst


def test_digest_is_a_function_of_the_files(tmp_path):
    here = provenance.source_digest()
    assert len(here) == 12 and int(here, 16) >= 0
    # a copy with or without pyproject.toml (an A/B tree on the GPU machine) reads the same files
    a = copy_tree(str(tmp_path / "a"), with_pyproject=True)
    b = copy_tree(str(tmp_path / "b"), with_pyproject=False)
    assert digest_of(a) == here
    assert digest_of(b) == here
    # one changed byte in a header, a table or a module changes it; a compiled-module cache does not
    for rel in ("templates/include/escha/trellis.h", "tuning/sm_90.json", "escha_jit/render.py"):
        p = os.path.join(b, rel)
        with open(p, "ab") as f:
            f.write(b" ")
        changed = digest_of(b)
        assert changed != here, rel
        with open(p, "rb+") as f:
            f.truncate(os.path.getsize(p) - 1)
    os.makedirs(os.path.join(b, "escha_jit", "__pycache__"), exist_ok=True)
    open(os.path.join(b, "escha_jit", "__pycache__", "x.pyc"), "wb").write(b"junk")
    assert digest_of(b) == here


def test_git_commit_outside_a_repository(tmp_path):
    t = copy_tree(str(tmp_path / "t"), with_pyproject=False)
    r = subprocess.run([sys.executable, "-c", "from escha_jit.provenance import git_commit; print(git_commit())"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": t,
                                                            "GIT_CEILING_DIRECTORIES": str(tmp_path)},
                       cwd=t, check=True)
    assert r.stdout.strip() == "unknown"


def test_package_data_ships_every_template_and_table():
    """pyproject's package-data globs (what a wheel carries) cover every file of templates/ and
    tuning/ that the package reads: a wheel without the device headers installs but cannot compile."""
    import glob
    import tomllib
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        setup = tomllib.load(f)["tool"]["setuptools"]
    for pkg, src in (("escha_jit.templates", "templates"), ("escha_jit.tuning", "tuning")):
        assert setup["package-dir"][pkg] == src
        root = os.path.join(REPO, src)
        shipped = set()
        for key, pats in setup["package-data"].items():     # the package and its data-only subpackages
            if key == pkg or key.startswith(pkg + "."):
                assert key in setup["packages"], f"{key!r} has package-data but is not in [tool.setuptools] packages"
                sub = os.path.join(root, *key[len(pkg) + 1:].split(".")) if key != pkg else root
                shipped |= {os.path.relpath(p, root) for pat in pats
                            for p in glob.glob(os.path.join(sub, pat), recursive=True)}
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for n in files:
                rel = os.path.relpath(os.path.join(d, n), root)
                if n != "__init__.py":
                    assert rel in shipped, f"{src}/{rel} is not in [tool.setuptools.package-data] {pkg!r}"
