#!/usr/bin/env python3
"""A bot app behind `tgrelay serve --gateway-listen 127.0.0.1:8081`, standard library only.

Run:  TGRELAY_TOKEN=<the bot's token> python3 app.py   (listens on 127.0.0.1:9000)
      tgrelay serve --forward http://127.0.0.1:9000/ --gateway-listen 127.0.0.1:8081 ...

The app calls the gateway with the bot's own token, as it would call Telegram: the token serve has
(TGRELAY_TOKEN), or, when serve runs without one against its built-in sandbox, the sandbox's token
that serve prints on start. The gateway refuses another token (401).

Each update arrives as a POST with the attempt's API root in Tgrelay-Api-Root. The app replies by
calling sendMessage under that root: the call keeps Telegram's limits, is refused (409) if this attempt
lost its lease, and if the update is retried, the identical call is answered from the journal instead
of reaching the chat twice.
"""
import json
import os
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = os.environ.get("TGRELAY_TOKEN", "")


def call(root, method, params):
    req = urllib.request.Request(
        f"{root}/bot{TOKEN}/{method}",
        data=json.dumps(params).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        # Above the gateway's answer bound (Tgrelay-Call-Timeout, 100 s by
        # default): a client that gives up sooner may leave a call that is sent.
        with urllib.request.urlopen(req, timeout=110) as resp:
            return resp.status, resp.headers, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.load(e)


class App(BaseHTTPRequestHandler):
    def do_POST(self):
        update = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        root = self.headers.get("Tgrelay-Api-Root")
        msg = update.get("message") or {}
        if root and "text" in msg:
            status, headers, body = call(root, "sendMessage", {"chat_id": msg["chat"]["id"], "text": msg["text"]})
            outcome = headers.get("Tgrelay-Outcome", "answered")
            if outcome in ("not-dispatched", "stale") or status in (401, 429):
                # 401: the gateway refused TGRELAY_TOKEN, a configuration problem,
                # not this update's: do not complete the update without its reply.
                self.send_response(503)  # the relay tries the update again later
                self.end_headers()
                return
            print(f"update {update['update_id']}: {status} {outcome} replayed={headers.get('Tgrelay-Replayed') == 'true'}")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    if not TOKEN:
        raise SystemExit("app.py: set TGRELAY_TOKEN to the bot's token (the sandbox's when serve runs without one)")
    ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), App).serve_forever()
