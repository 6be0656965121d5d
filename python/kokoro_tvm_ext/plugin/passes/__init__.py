"""Relax/IRModule passes of the plugin, one file each; pipeline.py orders them.

Importing this package registers the pipeline with TVM as ``"kokoro_tvm_ext_cpu"``.
Shared helpers live in ``_relax_utils.py``; no pass imports a sibling pass.
"""

from kokoro_tvm_ext.plugin.passes.pipeline import PIPELINE_NAME, cpu_pipeline, pass_list, plugin_passes

__all__ = ["PIPELINE_NAME", "cpu_pipeline", "pass_list", "plugin_passes"]
