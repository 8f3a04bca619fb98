"""`gpuleak top` in a real terminal: a tmux pane of its own tmux server. The
shell script around top records the terminal's settings (`stty -g`) before
and after, top's exit status and its pid; keys go in with send-keys and the
screen is read with capture-pane."""
import os
import shlex
import shutil
import subprocess
import tempfile

from process_fixtures import GPULEAK, wait_until

TMUX = shutil.which("tmux")
NO_TMUX = "tmux is not installed (scripts/setup --tests installs it)"


class Pane:
    def __init__(self, env, args, height=40):
        self._dir = tempfile.TemporaryDirectory(prefix="gpuleak-top-tmux-")
        self.dir = self._dir.name
        self.socket = os.path.join(self.dir, "tmux.sock")
        script = os.path.join(self.dir, "pane.sh")
        with open(script, "w") as f:
            for name in ("GPULEAK_DEVICE_FILE_GLOB", "GPULEAK_NVML_LIBRARY", "GPULEAK_STAND_IN_NVML_STATE"):
                if name in env:
                    f.write(f"export {name}={shlex.quote(env[name])}\n")
            f.write(f"cd {shlex.quote(self.dir)}\n")  # gpuleak attach's traces go here
            f.write("ulimit -c 0\n")  # the crash tests leave no core files behind
            f.write(f"stty -g > {self.dir}/before.txt\n")
            top = shlex.join([GPULEAK, "top", *args])
            f.write(f"sh -c 'echo $$ > {self.dir}/top.pid; exec \"$@\"' top {top}\n")
            f.write(f"echo $? > {self.dir}/status.txt\n")
            f.write(f"stty -g > {self.dir}/after.txt\n")
            f.write("echo TOP-ENDED\nexec sleep 600\n")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", str(height), "sh " + shlex.quote(script))

    def tmux(self, *args):
        return subprocess.run(
            [TMUX, "-S", self.socket, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    def keys(self, *keys):
        self.tmux("send-keys", *keys)

    def screen(self, history_lines=0):
        """What the pane shows, with that many lines scrolled off above it."""
        if history_lines:
            return self.tmux("capture-pane", "-p", "-S", str(-history_lines))
        return self.tmux("capture-pane", "-p")

    def wait_for(self, condition, history_lines=0, bound_s=30):
        seen = {}

        def check():
            seen["screen"] = self.screen(history_lines)
            return condition(seen["screen"])

        assert wait_until(check, bound_s=bound_s), "not on the screen:\n" + seen.get("screen", "")
        return seen["screen"]

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def top_pid(self):
        path = os.path.join(self.dir, "top.pid")
        assert wait_until(lambda: os.path.exists(path) and self.read("top.pid").endswith("\n"))
        return int(self.read("top.pid"))

    def close(self):
        subprocess.run(
            [TMUX, "-S", self.socket, "kill-server"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30
        )
        self._dir.cleanup()


def rows(screen):
    """[(pid, selected, line)] of the process table, top to bottom."""
    out = []
    lines = screen.splitlines()
    header = next((i for i, line in enumerate(lines) if "PID USER" in line), len(lines))
    for line in lines[header + 1 :]:
        head = line[:8]
        selected = head.startswith(">")
        text = head.lstrip(">").strip()
        if text.isdigit():
            out.append((int(text), selected, line))
    return out


def pids(screen):
    return [pid for pid, _, _ in rows(screen)]
