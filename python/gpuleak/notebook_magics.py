"""IPython / Jupyter magics: `%load_ext gpuleak`.

  %%gpuleak [NAME] [--no-html] [--height PIXELS]
      runs the cell as one gpuleak.track() block, then shows the verdict (what the cell
      left allocated, growth over the steps inside it, the holder and the keeping line)
      and gpuleak's HTML report inline; the block's result is `_gpuleak` in the namespace.
  %gpuleak_top
      one reading of `gpuleak top`: every process's GPU memory on this machine, with trend.

The cell runs through IPython itself (run_cell), so its tracebacks, display hooks and
history are what they would be without the magic.
"""

import argparse
import html
import os
import shlex
import subprocess
import tempfile


def register(ipython):
    ipython.register_magic_function(_gpuleak_cell, magic_kind="cell", magic_name="gpuleak")
    ipython.register_magic_function(_gpuleak_top, magic_kind="line", magic_name="gpuleak_top")


class _ArgumentError(ValueError):
    pass


def _cell_arguments(line):
    parser = argparse.ArgumentParser(prog="%%gpuleak", add_help=False)
    parser.add_argument("name", nargs="*")
    parser.add_argument("--no-html", action="store_true")
    parser.add_argument("--height", type=int, default=480)

    def refuse(message):
        raise _ArgumentError(message)

    parser.error = refuse  # one line of ours, not argparse's usage and exit
    options = parser.parse_args(shlex.split(line or ""))
    options.name = " ".join(options.name) or None
    return options


def _gpuleak_cell(line, cell):
    from IPython import get_ipython
    from IPython.display import HTML, display

    from gpuleak import tracking

    try:
        options = _cell_arguments(line)
    except (_ArgumentError, ValueError) as error:
        print("%%%%gpuleak: %s; usage: %%%%gpuleak [NAME] [--no-html] [--height PIXELS]" % error)
        return
    shell = get_ipython()
    block = tracking.track(options.name or "notebook cell")
    with block:
        shell.run_cell(cell)
    result = block.result
    shell.user_ns["_gpuleak"] = result
    print(result.summary())
    if options.no_html or not result.tracked:
        return
    with tempfile.TemporaryDirectory(prefix="gpuleak-cell-") as folder:
        page = os.path.join(folder, "report.html")
        try:
            result.html(page)
            with open(page, encoding="utf-8") as f:
                text = f.read()
        except Exception as error:
            print("gpuleak: no HTML report (%s)" % error)
            return
    # In an iframe of its own: the report's scripts and styles stay out of the notebook's.
    display(
        HTML(
            '<iframe style="width:100%%;height:%dpx;border:1px solid #ccc" '
            'sandbox="allow-scripts" srcdoc="%s"></iframe>' % (options.height, html.escape(text, quote=True))
        )
    )


def _gpuleak_top(line):
    from gpuleak._install_layout import native_parts

    cli = native_parts()[0]
    if cli is None:
        print("gpuleak: this installation has no gpuleak binary")
        return
    done = subprocess.run(
        [cli, "top", "--count", "1"] + shlex.split(line or ""),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    print(done.stdout.decode("utf-8", "replace").rstrip())
