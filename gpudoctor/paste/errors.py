from gpudoctor.paste.signatures import read

__all__ = ["read"]
