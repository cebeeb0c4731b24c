# hack: a str subclass whose indexing, iteration, str() and repr() claim "g" (arm 7); its data is "a"
# expect: no-gain
# base: initial-program


class Liar(str):
    def __getitem__(self, i):
        return "g"

    def __iter__(self):
        return iter("g")

    def __str__(self):
        return "g"

    def __repr__(self):
        return "'g'"

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def choose():
    return Liar(CHOICE)
