"""ECR login data (`_aws/ecr.py`): token decoding, and the one client call (mocked at the client boundary)."""

from __future__ import annotations

import base64
import datetime

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as _ecr
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

TOKEN = base64.b64encode(b"AWS:secret-password:with-colon").decode()
ENTRY = {
    "authorizationToken": TOKEN,
    "proxyEndpoint": "https://111111111111.dkr.ecr.eu-west-1.amazonaws.com",
    "expiresAt": datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC),
}


def test_decode_splits_user_and_password_and_strips_the_scheme():
    assert _ecr.decode_authorization(ENTRY) == {
        "registry": "111111111111.dkr.ecr.eu-west-1.amazonaws.com",
        "username": "AWS",
        "password": "secret-password:with-colon",
        "expires_at": "2030-01-01T12:00:00+00:00",
    }


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**ENTRY, "authorizationToken": "not base64!"}, "not base64"),
        ({**ENTRY, "authorizationToken": base64.b64encode(b"no-separator").decode()}, "does not hold user:password"),
        ({**ENTRY, "proxyEndpoint": ""}, "no proxyEndpoint"),
    ],
)
def test_decode_names_what_is_wrong(entry, message):
    with pytest.raises(InputError, match=message):
        _ecr.decode_authorization(entry)


class FakeEcr:
    def __init__(self, response: dict) -> None:
        self.response = response
        self.calls: list[dict] = []

    def get_authorization_token(self, **kwargs):
        self.calls.append(kwargs)
        return self.response


def test_get_authorization_retries_and_uses_the_first_entry():
    ecr = FakeEcr({"authorizationData": [ENTRY]})
    assert _ecr.get_authorization(ecr)["registry"] == "111111111111.dkr.ecr.eu-west-1.amazonaws.com"
    assert ecr.calls == [{"aws_retry": True}]


def test_get_authorization_without_data_fails():
    with pytest.raises(InputError, match="no authorization data"):
        _ecr.get_authorization(FakeEcr({"authorizationData": []}))
