"""Claude on AWS Bedrock and Google Vertex AI (DESIGN.md "Claude on clouds") on the one forwarding
path: each provider type is a `Wire` (wire.py) — its URL, body rewrite, signer and stream
decoder — that the exchange asks for those four pieces; the core, the failure policy and the
streaming stay one. `make.py` builds a profile's wire and credentials; `bedrock.py`,
`vertex.py` the wires; `credentials.py` the credentials that are neither a key nor an OAuth
login (a SigV4-signed profile's, Google's minted access tokens)."""
