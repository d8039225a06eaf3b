"""culina-resolver: the PEP 517 build backend (culina_resolver.backend) that installs a CUDA
extension as a verified prebuilt wheel or builds it for this host, and the modules it is made of
(docs/ARCHITECTURE.md, "The resolver"). A project adopts it by configuration (docs/ADOPTING.md)."""
