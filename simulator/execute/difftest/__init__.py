"""Differential testing of the Ferrite toolchain against the executor (issue 20), the way compiler
teams test against an interpreter: random legal-looking programs and mutations of them, judged by
`ferc check`, the executor and a numpy interpretation; `campaign.run` tallies the verdicts by class.
"""
