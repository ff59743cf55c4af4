"""Sessions on an S3-compatible object store: the sync engine and the store mirror.

Nothing here is imported by ``sessionfs`` or the local mount: the S3 client library is an
optional extra (``pip install 'sessionfs[store]'``) and only :mod:`sessionfs.store.client`
imports it. The object layout is written down in ``docs/store.md``.
"""
