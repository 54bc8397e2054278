"""The package's surface: the type stubs match the module, and help() shows the options."""

import ast
from pathlib import Path

import nmt
from nmt import _nmt

PACKAGE = Path(nmt.__file__).parent


def stub_classes(name):
    tree = ast.parse((PACKAGE / name).read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}, tree


def keyword_defaults(function):
    arguments = function.args
    return {a.arg: ast.literal_eval(d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)}


def test_stub_search_options_are_the_command_options():
    classes, _ = stub_classes("__init__.pyi")
    typed = {item.target.id for item in classes["SearchOptions"].body if isinstance(item, ast.AnnAssign)}
    assert typed == {name for name, _ in _nmt._search_options()}
    methods = {m.name: m for m in classes["Translator"].body if isinstance(m, ast.FunctionDef)}
    for method, own in (("translate_batch", {"n_best", "return_attention", "return_alignment", "return_confidence",
                                             "prefix", "constraints"}),
                        ("translate_file", {"n_best", "with_scores", "alignment", "attention_dir", "prefix_file",
                                            "constraints_file"})):
        assert set(keyword_defaults(methods[method])) == own
        assert ast.unparse(methods[method].args.kwarg.annotation) == "Unpack[SearchOptions]"


def test_stub_attributes_exist_on_the_classes():
    for file, module in (("__init__.pyi", nmt), ("evaluate.pyi", nmt.evaluate)):
        classes, tree = stub_classes(file)
        for name, node in classes.items():
            if name == "SearchOptions":  # keywords, not a class of the module
                continue
            cls = getattr(module, name)
            for item in node.body:
                member = item.target.id if isinstance(item, ast.AnnAssign) else item.name
                assert hasattr(cls, member), f"{name}.{member}"
            public = {m for m in dir(cls) if not m.startswith("_")}
            stubbed = {i.target.id if isinstance(i, ast.AnnAssign) else i.name for i in node.body}
            assert public <= stubbed, f"{name}: {public - stubbed} missing from {file}"
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert all(callable(getattr(module, f)) for f in functions)


def test_help_shows_the_search_options():
    doc = nmt.Translator.translate_batch.__doc__
    assert "beam_size (5): beam size" in doc and "sampling_topk (0)" in doc
    assert "threads" not in doc.split("Search options")[1]
    assert nmt.__version__
