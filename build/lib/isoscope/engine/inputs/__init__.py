"""What the extraction reads: text corpora and their files, folders of images or audio, and the
labelled sentence pairs of the similarity views, each through the checks every user file gets.
"""
