"""The viewing process's main loop (``python -m srl_lab.viewer.serve [NICE]``): requests in, episodes out.

Its stdout carries only replies; anything else the process prints goes to stderr.
"""
from __future__ import annotations

import os
import sys
import traceback

from srl_lab.viewer.episode import Player
from srl_lab.viewer.process import receive, send


def main() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the replies
    requests = sys.stdin.buffer
    try:
        os.nice(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
    except OSError:  # not permitted here: play at normal priority
        pass
    player = Player()
    while (request := receive(requests)) is not None:
        request_id, config, source, seed, pixels, max_steps, fps = request
        try:
            reply = (request_id, True, player.play(config, source, seed, pixels, max_steps, fps))
        except Exception:  # noqa: BLE001  (sent back whole: the viewer shows the traceback)
            reply = (request_id, False, traceback.format_exc())
        send(replies, reply)


if __name__ == "__main__":
    main()
