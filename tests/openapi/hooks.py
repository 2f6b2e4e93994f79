"""schemathesis hooks for tests/openapi.rs (loaded through SCHEMATHESIS_HOOKS=hooks)."""

import schemathesis

# A tus part (PATCH /v1/uploads/{id}) is raw bytes under tus's own media type, which
# schemathesis has no serializer for.
schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")
