"""Generated code of proto/yesguard/v1/guard.proto (clients/python/buf.gen.yaml)."""
