"""Ops: per op, the spec it needs, the launch geometry and argument list, and a torch entry point."""
