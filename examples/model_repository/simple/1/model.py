"""A small Triton python-backend model: OUTPUT0 = INPUT0 + offset, after an optional delay.

Behaviour comes from config.pbtxt parameters so one file serves every test model:
offset (float), delay_ms (int), fail_to_load ("true" makes initialize raise), fail_every (int: every Nth request
of a model instance fails, so 33 fails 3 % of requests; 0, the default, never).

A failing request makes execute() raise, as a model that breaks does: Triton then answers an error (HTTP 500, a gRPC
error) and counts the request in nv_inference_request_failure (reason BACKEND). An error a python model puts in its
InferenceResponse instead is answered just the same but counted as a success (measured on Triton 2.51).
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        if params.get("fail_to_load") == "true":
            raise RuntimeError("model configured to fail loading (fail_to_load=true)")
        self.offset = np.float32(params.get("offset", "0"))
        self.delay_s = int(params.get("delay_ms", "0")) / 1000.0
        self.fail_every = int(params.get("fail_every", "0"))
        self.requests = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.requests += 1
            if self.fail_every and self.requests % self.fail_every == 0:
                # fails every request of this call (one here: the model does not batch)
                raise pb_utils.TritonModelException(f"request {self.requests} failed (fail_every={self.fail_every})")
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if self.delay_s:
                time.sleep(self.delay_s)
            output = pb_utils.Tensor("OUTPUT0", (values + self.offset).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
