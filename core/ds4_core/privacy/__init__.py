"""Privacy (docs/privacy.md): classification levels and markers, destinations, secret
redaction and the sanitizer of everything that leaves for a model.

Modules: `levels` (the four levels), `markers` (inline `[ds4:LEVEL]` markers), `secrets` (the
secret detector shared with the project index filters), `redaction` (secret redaction for
remote destinations), `policy` (settings -> what a destination may see), `sanitizer` (planned
messages, supplements and payloads for one destination; fails closed).
"""
