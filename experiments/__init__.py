"""aiko.experiments"""
