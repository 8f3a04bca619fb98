"""What this process is to its job, and when its program's code returned, as trace annotations.

Written once CUDA is up in a process (gpuleak._boot.on_cuda_initialized):

  process_role  {"dataloader_worker": {"id": 2, "num_workers": 4},
                 "multiprocessing": {"name": "SpawnPoolWorker-3", "parent_pid": 4700,
                                     "start_method": "spawn"}}
                either key may be missing: "dataloader_worker" only inside a
                torch DataLoader worker, "multiprocessing" only in a process
                multiprocessing started. The analysis names roles from it
                (src/analysis/processes/process_roles.h).
  python_exit   {} at the moment Python's atexit handlers begin. It is
                registered after multiprocessing's own handler (which joins
                every non-daemon child), so it runs before it: the time says
                when the program's code returned, before the process waits
                for children left running.

Nothing here raises; nothing here touches CUDA.
"""
import atexit
import json
import sys


def describe_process_role():
    """The `process_role` annotation for this process, or None when it is nobody's worker."""
    role = {}
    data = sys.modules.get("torch.utils.data")
    get_worker_info = getattr(data, "get_worker_info", None) if data is not None else None
    if get_worker_info is not None:
        try:
            info = get_worker_info()
        except Exception:
            info = None
        if info is not None:
            role["dataloader_worker"] = {"id": int(info.id), "num_workers": int(info.num_workers)}
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:
        try:
            current = multiprocessing.current_process()
            if current.name != "MainProcess":
                parent = multiprocessing.parent_process() if hasattr(multiprocessing, "parent_process") else None
                role["multiprocessing"] = {
                    "name": str(current.name),
                    "parent_pid": parent.pid if parent is not None else None,
                    "start_method": multiprocessing.get_start_method(allow_none=True),
                }
        except Exception:
            pass
    return role or None


def annotate_process_role(collector):
    role = describe_process_role()
    if role is not None:
        collector.annotate("process_role", json.dumps(role))


_exit_marker_installed = False


def install_exit_marker(collector):
    """Registers the `python_exit` annotation (once per process)."""
    global _exit_marker_installed
    if _exit_marker_installed:
        return
    _exit_marker_installed = True
    # multiprocessing registers its exit handler (the join of non-daemon
    # children) when multiprocessing.util is first imported; importing it here
    # first makes sure ours, registered after it, runs before it.
    import multiprocessing.util  # noqa: F401

    def mark_exit():
        try:
            collector.annotate("python_exit", "{}")
            collector.flush()
        except Exception:
            pass

    atexit.register(mark_exit)
