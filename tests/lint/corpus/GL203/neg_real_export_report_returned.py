# Shape of pytorch/pytorch:torch/_export/tools.py (report_exportability), shortened. Clean: the
# exceptions are the function's result, one per submodule that failed to export, handed
# to the caller; nothing in it runs per training step.
import logging

import torch
import torch.export

log = logging.getLogger(__name__)


def report_exportability(mod, args, kwargs=None):
    report = {}

    def try_export(module, module_name, args, kwargs):
        nonlocal report
        if args is not None or kwargs is not None:
            try:
                torch.export.export(module, args, kwargs)
                report[module_name] = None
                return
            except Exception as e:
                log.warning("Failed exporting %s: %s", module_name, repr(e).split("\n")[0])
                report[module_name] = e
        for name, submod in module.named_children():
            try_export(submod, f"{module_name}.{name}", None, None)

    try_export(mod, "", args, kwargs)
    return report
