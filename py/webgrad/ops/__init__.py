"""Ops: each op's shape rule, forward kernel call and backward rule, one family per module."""
