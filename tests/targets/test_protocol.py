import pytest

from recsys_eval.errors import ConfigError
from recsys_eval.targets import Protocol
from recsys_eval.targets.protocol import CANDIDATES, NONRELEVANT, RELEVANT


@pytest.mark.parametrize("candidates", CANDIDATES)
@pytest.mark.parametrize("relevant", RELEVANT)
@pytest.mark.parametrize("nonrelevant", ["AN", "NN1", "NN100", "NN2500"])
def test_every_name_parses_back_to_itself(candidates, relevant, nonrelevant):
    name = f"{candidates}+{relevant}+{nonrelevant}"
    protocol = Protocol.parse(name)
    assert protocol.name == name == str(protocol)
    assert (protocol.candidates, protocol.relevant) == (candidates, relevant)
    assert protocol.nonrelevant == nonrelevant[:2]
    assert protocol.n == (None if nonrelevant == "AN" else int(nonrelevant[2:]))
    assert Protocol.parse(protocol) is protocol


def test_parse_defaults_and_case():
    assert Protocol.parse("ai+1r+nn").name == "AI+1R+NN100"
    assert Protocol.parse(" TI + AR + NN5 ").name == "TI+AR+NN5"
    assert Protocol("AI", "1R", "NN").n == 100
    assert Protocol().name == "AI+AR+AN"


def test_full_ranking_is_ai_or_ti_with_ar_an():
    full = {p for c in CANDIDATES for r in RELEVANT for n in NONRELEVANT
            if (p := Protocol.parse(f"{c}+{r}+{n}")).full_ranking}
    assert {p.name for p in full} == {"AI+AR+AN", "TI+AR+AN"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("XI+AR+AN", "'AI', 'TI', 'UT'"),
        ("AX+AR+AN", "did you mean 'AI'"),
        ("AI+2R+AN", "'1R'"),
        ("AI+AR+NA", "'AN'"),
        ("AI+AR", "three parts"),
        ("AI+AR+AN+NN", "three parts"),
        ("AI+1R+NN0", ">= 1"),
        ("AI+1R+NN-3", "positive count"),
    ],
)
def test_bad_names_say_what_is_allowed(text, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")) as err:
        Protocol.parse(text)
    assert text[:2] in str(err.value)


def test_sample_size_rules():
    with pytest.raises(ConfigError, match="takes no sample size"):
        Protocol("AI", "AR", "AN", 5)
    with pytest.raises(ConfigError, match=">= 1"):
        Protocol("AI", "AR", "NN", 0)
