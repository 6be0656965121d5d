"""Relax/IRModule passes of the plugin, one file each; pipeline.py orders them."""
