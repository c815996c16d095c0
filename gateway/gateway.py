"""Entry point of the hospital gateway image: `medchallenge gateway` (configuration: $GATEWAY_CONFIG or
/etc/medchallenge/gateway.toml)."""

import sys

from medchallenge.gateway import main

sys.exit(main())
