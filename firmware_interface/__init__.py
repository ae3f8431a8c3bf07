"""aiko.firmware_interface"""
