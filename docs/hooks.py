"""MkDocs hook (mkdocs.yml `hooks:`): adds the generated pages of reference_pages.py (the CLI,
hparams and problems reference, the model_dir and data_dir layout, the Python API, the benchmark
results, the README's pages) and the design page's picture of the house (house_diagram.py) to
the site's files, in memory, so that nothing generated is written into docs/ or committed."""

from mkdocs.structure.files import File

import house_diagram  # beside this file
import reference_pages  # beside this file: MkDocs puts the hook's folder on sys.path to load it


def on_files(files, config):
    generated = {**reference_pages.pages(), "img/house.svg": house_diagram.house_svg()}
    for uri, content in generated.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated at build time: delete the typed copy")
        files.append(File.generated(config, uri, content=content))
    return files
