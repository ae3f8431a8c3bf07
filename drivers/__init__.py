"""aiko.drivers"""
