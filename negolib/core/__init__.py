"""What every layer of negolib uses: errors, files, formatting, the schema reader, secrets, sampling settings,
progress, the headline file, the chat template's turn tags, the crossing sanitiser and the transcript store.

The package imports nothing itself: import the module you need (``from negolib.core.errors import ...``).
"""
