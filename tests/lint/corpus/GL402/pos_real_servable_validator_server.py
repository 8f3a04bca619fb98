# Shape of Lightning-AI/pytorch-lightning@7f0c3436cd3f6ad3753125672024fc415cbcb414:src/lightning/pytorch/serve/servable_module_validator.py
# (ServableModuleValidator.on_train_start), shortened. Kept: an exception between the
# start and the final kill (a request error other than ConnectionError, a failing
# configure_payload()) leaves the server process, and the model it serves, running.
import contextlib
import time
from multiprocessing import Process

import requests
import torch


class ServableModuleValidator:
    def on_train_start(self, trainer, servable_module):
        servable_module.trainer = None
        process = Process(target=self._start_server, args=(servable_module, self.host, self.port))  # expect: GL402
        process.start()
        servable_module.trainer = trainer
        ready = False
        t0 = time.time()
        while not ready:
            with contextlib.suppress(requests.exceptions.ConnectionError):
                resp = requests.get(f"http://{self.host}:{self.port}/ping")
                ready = resp.status_code == 200
            if time.time() - t0 > self.timeout:
                process.kill()
                raise Exception(f"The server didn't start within {self.timeout} seconds.")
            time.sleep(0.1)
        payload = servable_module.configure_payload()
        self.resp = requests.post(f"http://{self.host}:{self.port}/serve", json=payload)
        process.kill()
