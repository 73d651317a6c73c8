"""What a server shared by many visitors needs from the engine: who may do what, identical work run
once in a fair queue, and the first look on a device's first run.
"""
