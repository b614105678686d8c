from __future__ import annotations

import pytest
from rel_helpers import CKPT, spec_405b


@pytest.fixture(scope="session")
def spec405():
    return spec_405b(dict(CKPT))
