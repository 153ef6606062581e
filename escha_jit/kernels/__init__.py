"""Kernel families, compile side (torch-free): per family the KernelSpec it builds, the template
variables it renders, its argument list and launch geometry rules. ``escha_jit.ops`` holds the
torch entry points that launch them."""

DTYPE_CODES = {"f16": 0, "bf16": 1, "f32": 2}
"""Element type codes the templates' ``dtype_of<>`` understands."""
