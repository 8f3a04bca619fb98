"""The `gpuleak` command a wheel installs: runs the CLI that the wheel carries.

The wheel puts the CLI, the collector and the interposer under
gpuleak/_native/ (scripts/package); this replaces the Python process with
the CLI, so signals, exit status and the terminal are the CLI's own.
"""
import os
import sys


def native_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def main():
    binary = os.path.join(native_dir(), "gpuleak")
    if not os.access(binary, os.X_OK):
        sys.stderr.write(
            "gpuleak: this installation has no gpuleak binary (%s): the command comes "
            "with the wheel that scripts/package builds\n" % binary
        )
        return 3
    os.execv(binary, [binary] + sys.argv[1:])
    return 3  # not reached


if __name__ == "__main__":
    sys.exit(main())
