"""Adapters that make hexgrad's ``kokoro.KModel`` exportable with symbolic lengths.

Modules here wrap or substitute parts of the installed kokoro package (never
edit it): ``decoder`` (stage 2's vocoder half, with ``stft``).
"""
