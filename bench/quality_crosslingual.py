#!/usr/bin/env python
"""Search by meaning across languages: does a sentence find its own translation?

    .venv/bin/python bench/quality_crosslingual.py [--models all-MiniLM-L6-v2,multilingual-e5-small]

``PAIRS`` below: 24 sentences written for this bench on the fixtures' topics
(bees, rivers, soil, lichens, field studies, lectures), each in English,
Norwegian (bokmål) and Chinese. For each direction (no→en, en→no, zh→en,
en→zh) every sentence of one language is embedded as a query (the model's
query form) and every sentence of the other as a passage (its passage form,
as the embedding run stores chunks); printed per model and direction: the
share of queries whose own translation is the nearest of the 24 candidates
(rank-1 rate) and their mean rank. Models not installed here are skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from researchstore.meaning.embedding import (
    MINILM,
    MULTILINGUAL,
    Embedder,
    embed_queries,
    load_embedder,
    model_installed,
)

#: (English, Norwegian bokmål, Chinese): the same sentence three times.
PAIRS: list[tuple[str, str, str]] = [
    (
        "Honeybee colonies that went into winter with many varroa mites rarely survived "
        "until spring.",
        "Bikuber som gikk inn i vinteren med mange varroamidd, overlevde sjelden til våren.",
        "带着大量瓦螨进入冬季的蜂群很少能存活到春天。",
    ),
    (
        "The beekeeper added a second box to the hive when the nectar flow began in June.",
        "Birøkteren satte en ekstra kasse på kuben da nektartrekket startet i juni.",
        "六月流蜜期开始时，养蜂人给蜂箱加了第二层箱体。",
    ),
    (
        "Wild bumblebees visited the clover field far more often than the honeybees did.",
        "Ville humler besøkte kløverenga langt oftere enn honningbiene gjorde.",
        "野生熊蜂造访三叶草田的次数远多于蜜蜂。",
    ),
    (
        "Pollen loads collected at the hive entrance showed that the bees preferred willow "
        "in early spring.",
        "Pollenklumper samlet ved flyåpningen viste at biene foretrakk selje tidlig på våren.",
        "在蜂箱入口收集的花粉团表明，蜜蜂在早春偏爱柳树。",
    ),
    (
        "After the heavy rain the river carried so much sediment that the water turned brown.",
        "Etter det kraftige regnet førte elva så mye sediment at vannet ble brunt.",
        "大雨过后，河水携带了大量泥沙，变成了褐色。",
    ),
    (
        "Salmon returned to spawn in the upper stretch of the river once the old dam was removed.",
        "Laksen kom tilbake for å gyte i den øvre delen av elva etter at den gamle demningen "
        "ble fjernet.",
        "旧水坝拆除后，鲑鱼回到河流上游产卵。",
    ),
    (
        "Nitrate levels in the stream were highest just after farmers spread manure on the fields.",
        "Nitratnivået i bekken var høyest like etter at bøndene hadde spredt gjødsel på jordene.",
        "农民在田里施撒粪肥之后，溪流中的硝酸盐含量最高。",
    ),
    (
        "In late summer the water temperature rose above twenty degrees and oxygen levels fell.",
        "På ettersommeren steg vanntemperaturen over tjue grader, og oksygennivået sank.",
        "夏末水温升至二十度以上，溶解氧含量随之下降。",
    ),
    (
        "Earthworms pull fallen leaves down into their burrows and mix them into the soil.",
        "Meitemark drar nedfalne blader ned i gangene sine og blander dem inn i jorda.",
        "蚯蚓把落叶拖进洞穴，并把它们混入土壤中。",
    ),
    (
        "Soil that had been ploughed every year held much less carbon than the untouched meadow.",
        "Jord som var pløyd hvert år, inneholdt mye mindre karbon enn den urørte enga.",
        "每年翻耕的土壤所含的碳远少于未经扰动的草地。",
    ),
    (
        "Fungal threads bind small clay particles into crumbs that let water drain through.",
        "Soppråder binder små leirpartikler sammen til smuler som lar vannet renne gjennom.",
        "真菌菌丝把细小的黏土颗粒粘结成团粒，使水能够渗透下去。",
    ),
    (
        "The students dug a pit one metre deep to look at the layers of the soil.",
        "Studentene gravde en grop på én meters dybde for å se på lagene i jordsmonnet.",
        "学生们挖了一个一米深的坑来观察土壤的分层。",
    ),
    (
        "Lichens on the old birch trees disappeared as the air near the road became more polluted.",
        "Lavene på de gamle bjørketrærne forsvant etter hvert som lufta nær veien ble mer "
        "forurenset.",
        "随着公路附近空气污染加重，老桦树上的地衣消失了。",
    ),
    (
        "A lichen is a partnership between a fungus and an alga that can live on bare rock.",
        "En lav er et samliv mellom en sopp og en alge som kan leve på bart fjell.",
        "地衣是真菌与藻类的共生体，能生长在裸露的岩石上。",
    ),
    (
        "Reindeer depend on ground lichens for food during the long winter.",
        "Reinsdyr er avhengige av reinlav som føde gjennom den lange vinteren.",
        "驯鹿在漫长的冬季依靠地面上的地衣为食。",
    ),
    (
        "Lichens grow only a few millimetres each year, so a large patch can be centuries old.",
        "Lav vokser bare noen få millimeter i året, så et stort felt kan være flere hundre "
        "år gammelt.",
        "地衣每年只生长几毫米，因此一大片地衣可能已有数百年历史。",
    ),
    (
        "We counted the birds along the same transect every morning for two weeks.",
        "Vi talte fuglene langs den samme transekten hver morgen i to uker.",
        "两周里，我们每天早上沿着同一条样线统计鸟类。",
    ),
    (
        "The field team lost a day of sampling because the boat engine would not start.",
        "Feltteamet mistet en dag med prøvetaking fordi båtmotoren ikke ville starte.",
        "由于船的发动机无法启动，野外小组损失了一天的采样时间。",
    ),
    (
        "Every sample bottle was labelled with the date, the site and the depth before it "
        "was frozen.",
        "Hver prøveflaske ble merket med dato, sted og dybde før den ble frosset.",
        "每个样品瓶在冷冻前都标注了日期、地点和深度。",
    ),
    (
        "GPS readings in the steep valley were often off by more than twenty metres.",
        "GPS-målingene i den bratte dalen bommet ofte med mer enn tjue meter.",
        "在陡峭的山谷里，GPS读数的误差常常超过二十米。",
    ),
    (
        "In today's lecture the professor explained why insects are declining across Europe.",
        "I dagens forelesning forklarte professoren hvorfor insektene blir færre over hele Europa.",
        "在今天的讲座中，教授解释了欧洲各地昆虫数量下降的原因。",
    ),
    (
        "The recording of the lecture cut off before the questions from the audience.",
        "Opptaket av forelesningen stoppet før spørsmålene fra salen.",
        "讲座的录音在听众提问之前就中断了。",
    ),
    (
        "Students had to hand in their field notebooks one week after the excursion.",
        "Studentene måtte levere feltdagbøkene sine én uke etter ekskursjonen.",
        "学生们必须在野外考察结束一周后交上野外记录本。",
    ),
    (
        "The guest speaker showed maps of how the glacier has retreated since 1900.",
        "Gjesteforeleseren viste kart over hvordan breen har trukket seg tilbake siden 1900.",
        "客座讲者展示了自1900年以来冰川退缩情况的地图。",
    ),
]

LANGUAGES = {"en": 0, "no": 1, "zh": 2}
DIRECTIONS = (("no", "en"), ("en", "no"), ("zh", "en"), ("en", "zh"))


def ranks(model: Embedder, queries: list[str], candidates: list[str]) -> list[int]:
    """Each query's rank (1 = nearest) of the candidate at its own position."""
    import numpy as np

    query_rows = np.asarray(embed_queries(model, queries), dtype=np.float32)
    passage_rows = np.asarray(model.embed(candidates, batch_size=64), dtype=np.float32)
    query_rows /= np.linalg.norm(query_rows, axis=1, keepdims=True)
    passage_rows /= np.linalg.norm(passage_rows, axis=1, keepdims=True)
    scores = query_rows @ passage_rows.T
    return [1 + int((scores[row] > scores[row, row]).sum()) for row in range(len(queries))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=f"{MINILM},{MULTILINGUAL}")
    args = parser.parse_args()
    print(f"{len(PAIRS)} sentences per language; rank-1 rate (mean rank) per direction")
    print(f"{'model':24} " + " ".join(f"{f'{a}→{b}':12}" for a, b in DIRECTIONS))
    for name in args.models.split(","):
        if not model_installed(name):
            print(f"{name:24} skipped: not installed")
            continue
        model = load_embedder(name=name)
        started = time.perf_counter()
        cells = []
        for source, target in DIRECTIONS:
            queries = [pair[LANGUAGES[source]] for pair in PAIRS]
            candidates = [pair[LANGUAGES[target]] for pair in PAIRS]
            found = ranks(model, queries, candidates)
            rate = sum(rank == 1 for rank in found) / len(found)
            cells.append(f"{rate:5.2f} ({sum(found) / len(found):4.2f})")
        seconds = time.perf_counter() - started
        print(f"{name:24} " + " ".join(cells) + f"   [{model.model_id}, {seconds:.1f} s]")


if __name__ == "__main__":
    main()
