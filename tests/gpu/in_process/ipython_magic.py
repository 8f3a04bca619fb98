"""%%gpuleak in IPython's own shell on the GPU (no kernel: the GPU machine has IPython only when
it is carried). Prints the cell magic's output."""
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_cell("%load_ext gpuleak")
shell.run_cell("import torch\nkept = []")
shell.run_cell(
    "%%gpuleak --no-html gpu cell\n" "for i in range(3):\n" "    kept.append(torch.randn(1 << 18, device='cuda'))"
)
shell.run_cell("print('VERDICT', _gpuleak.verdict, _gpuleak.left_behind_bytes)")
