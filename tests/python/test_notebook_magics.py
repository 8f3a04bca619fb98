"""The IPython extension (`%load_ext gpuleak`, gpuleak/notebook_magics.py) in a real Jupyter
kernel: nbclient executes a notebook whose cells make stand-in tensors that go through the
allocator hook's entry points."""
import os

import pytest

from conftest import PACKAGE_DIR, build_dir

HERE = os.path.dirname(os.path.abspath(__file__))

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def cell_texts(cell):
    texts = []
    for output in cell.get("outputs", []):
        if output.get("text"):
            texts.append(output["text"])
        elif output.get("output_type") == "error":
            texts.append("ERROR " + output.get("ename", "") + ": " + output.get("evalue", ""))
    return "".join(texts)


def test_a_cell_under_gpuleak_shows_its_verdict_holder_and_html_report(tmp_path, monkeypatch):
    cli = os.path.join(build_dir(), "gpuleak")
    collector = os.path.join(build_dir(), "libgpuleak_collector.so")
    if not (os.path.exists(cli) and os.path.exists(collector)):
        pytest.skip("no gpuleak and collector in %s (GPULEAK_BUILD_DIR)" % build_dir())
    for name in ("GPULEAK_TRACE_DIR", "GPULEAK_TORCH_MODE", "GPULEAK_HOLDER_REQUESTS"):
        monkeypatch.delenv(name, raising=False)
    # The kernel inherits this environment.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PACKAGE_DIR, os.path.join(HERE, "tracking")]))
    monkeypatch.setenv("GPULEAK_BINARY", cli)
    monkeypatch.setenv("GPULEAK_COLLECTOR", collector)
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext gpuleak\n" "from stand_in_tensors import gpu_tensor\n" "kept = []"),
        nbformat.v4.new_code_cell(
            "%%gpuleak leaky cell\n" "for i in range(3):\n" "    kept.append(gpu_tensor(1 << 18))"
        ),
        nbformat.v4.new_code_cell("%%gpuleak --no-html\n" "x = gpu_tensor(1 << 18)\n" "del x"),
        nbformat.v4.new_code_cell("print(_gpuleak.verdict, _gpuleak.peak_bytes)"),
        nbformat.v4.new_code_cell("%%gpuleak --height\n1"),
        nbformat.v4.new_code_cell("%gpuleak_top --no-nvml"),
    ]
    client = nbclient.NotebookClient(
        notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    cells = notebook.cells
    leaky = cell_texts(cells[1])
    assert "gpuleak: block `leaky cell` left 3.0 MiB allocated at its end (1 place)" in leaky
    assert "held by list `kept` (module __main__)" in leaky
    assert "kept.append(gpu_tensor(1 << 18))" in leaky  # the cell's own line
    html = [o for o in cells[1].outputs if "text/html" in o.get("data", {})]
    assert len(html) == 1
    page = html[0]["data"]["text/html"]
    assert page.startswith("<iframe") and "srcdoc=" in page and "d3" in page
    assert "clean: nothing it allocated is still allocated" in cell_texts(cells[2])
    assert not [o for o in cells[2].outputs if "text/html" in o.get("data", {})]
    assert cell_texts(cells[3]).strip() == "clean 1048576"
    assert "%%gpuleak: argument --height: expected one argument; usage: %%gpuleak [NAME]" in cell_texts(cells[4])
    assert "gpuleak top" in cell_texts(cells[5])
