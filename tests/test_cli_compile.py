"""escha-jit compile --only: the shipped specializations whose name holds the text, compiled and
checked like the full run (NVRTC on this CPU machine), and a clear error where none matches."""
import json

import pytest

from escha_jit.cli import main


def test_compile_only_names_a_subset(tmp_path):
    out = tmp_path / "rows.json"
    rc = main(["compile", "--arch", "sm_90", "--all", "--only", "dense_k2_mcg", "--cache-dir", str(tmp_path / "c"),
               "-j", "1", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert rc == 0 and len(rows) == 3                      # fp16, bf16 and the fp16 amax variant
    assert all("dense_k2_mcg" in r["spec"] and r["error"] is None and not r["problems"] for r in rows)


def test_compile_only_without_a_match_names_the_option(tmp_path):
    with pytest.raises(SystemExit, match="--only 'no_such_kernel': no representative specialization for sm_90"):
        main(["compile", "--arch", "sm_90", "--only", "no_such_kernel", "--cache-dir", str(tmp_path)])
