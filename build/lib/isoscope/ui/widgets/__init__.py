"""Controls and charts every page builds the same way: sliders from a parameter's declaration, the
ranges a control and a link accept, charts that stay mounted, the token atlas.
"""
