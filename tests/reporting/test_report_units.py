"""Report units scale to the value (J/Wh/kWh, g/kg/t CO2e, no e-notation); the power plot's time axis
fits the job, small lines get their own axis, the legend stays off the data; utilisation labelled."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_energy.cli.jobenergy_format import fmt_num
from slurm_energy.model import NodeSummary
from slurm_energy.reporting.job_facts import util_label
from slurm_energy.reporting.plot import near_zero_series, power_figure, power_svg, time_unit
from slurm_energy.reporting.report import render_csv, render_html
from slurm_energy.reporting.scale import co2e_text, energy_text, kwh_energy_text
from tests.helpers.report_records import tdp_cpu_record

T0 = 1_700_000_000.0


@pytest.mark.parametrize("joules,text", [
    (368.0, "368 J"), (3599.0, "3599 J"), (3600.0, "1 Wh"), (45_000.0, "12.5 Wh"),  # 45000 / 3600 = 12.5
    (12.24e6, "3.4 kWh"),  # 12.24e6 J / 3.6e6 = 3.4 kWh
    (7.2e9, "2 MWh"), (0.5, "0.5 J"), (0.0, "0 J"),
])
def test_energy_scales(joules, text):
    assert energy_text(joules) == text


def test_co2e_scales_no_tiny_kilograms():
    assert co2e_text(0.0001021) == "0.102 g"  # 0.0001021 kg = 0.1021 g, 3 significant figures
    assert co2e_text(0.25) == "250 g" and co2e_text(3.4) == "3.4 kg" and co2e_text(2500.0) == "2.5 t"
    assert co2e_text(None) == "n/a" and kwh_energy_text(None) == "n/a"
    assert kwh_energy_text(0.0001369) == "493 J"  # 0.0001369 kWh x 3.6e6 = 492.84 J


@given(st.floats(min_value=1e-12, max_value=1e15, allow_nan=False))
def test_never_e_notation(v):
    for text in (energy_text(v), co2e_text(v), fmt_num(v)):
        assert "e" not in text.replace("Wh", "").replace(" J", "")


def test_jobenergy_columns_stay_kwh_without_e_notation():
    assert fmt_num(1.021e-5) == "0.00001021" and fmt_num(0.0001369) == "0.0001369" and fmt_num(1234.5) == "1234"


def test_html_uses_scaled_units_csv_fixed_units():
    rec = tdp_cpu_record()  # 492.84 J = 0.0001369 kWh; facility x 1.2 = 591.4 J; CO2e 0.1643 Wh... in g:
    html = render_html(rec)
    assert "493 J" in html and "0.0001369 kWh" not in html.split("How it was computed")[0]
    # CO2e = 0.0001369 kWh x 1.2 x 100 g/kWh = 0.016428 g
    assert "0.0164 g CO2e" in html
    assert "e-0" not in html
    csv = render_csv(rec)
    assert csv.splitlines()[0].count("kWh") >= 3 and "kgCO2e" in csv.splitlines()[0]
    assert "0.0001369" in csv and "e-0" not in csv


def _node(span_s: float, cpu_w=50.0, gpu_w=None, ram_w=None, n=40):
    trace = [[T0 + span_s * k / (n - 1), cpu_w, gpu_w, ram_w] for k in range(n)]
    return NodeSummary(node="n1", job_id="1", start_time=T0, end_time=T0 + span_s, power_trace=trace)


@pytest.mark.parametrize("span,unit", [(43.0, "s"), (180.0, "s"), (600.0, "min"), (2 * 3600.0, "min"), (10 * 3600.0, "h")])
def test_time_axis_fits_the_job(span, unit):
    assert time_unit(span)[0] == unit
    fig = power_figure([_node(span)], T0)
    ax = fig.axes[0]
    assert ax.get_xlabel() == f"time since job start ({unit})"
    # the last sample sits at span / unit seconds: a 43 s job ends at x = 43, not 0.72 (minutes)
    assert max(ax.lines[0].get_xdata()) == pytest.approx(span / time_unit(span)[1])


def test_near_zero_line_gets_the_right_axis_and_legend_is_below_the_data():
    # GPU 300 W, RAM 2 W (2 < 0.1 x 300): RAM on its own right axis, readable
    assert near_zero_series([[300.0], [2.0]]) == {1} and near_zero_series([[300.0], [200.0]]) == set()
    fig = power_figure([_node(43.0, cpu_w=None, gpu_w=300.0, ram_w=2.0)], T0)
    ax, ax2 = fig.axes[0], fig.axes[1]
    assert [line.get_label() for line in ax2.lines] == ["RAM (right axis)"]
    assert max(ax2.lines[0].get_ydata()) == 2.0 and ax2.get_ylim()[1] < 10  # scaled to the small line
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    leg, box = ax.get_legend().get_window_extent(r), ax.get_window_extent(r)
    assert leg.y1 <= box.y0  # the legend is wholly below the axes: it covers no data
    svg = power_svg([_node(43.0, cpu_w=None, gpu_w=300.0, ram_w=2.0)], T0)
    assert "RAM (right axis)" in svg


def test_a_trace_row_without_its_time_is_left_out_of_the_plot():
    # the model allows None in every column of a stored power_trace row, the time too; such a row
    # cannot be placed on the time axis: it is skipped (before, the plot raised TypeError on
    # None - float and the whole HTML report was lost)
    node = _node(43.0, n=4)  # samples at 0, 14.33, 28.67, 43 s, CPU 50 W
    node.power_trace.insert(2, [None, 999.0, None, None])
    fig = power_figure([node], T0)
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == pytest.approx([0.0, 43.0 / 3, 86.0 / 3, 43.0])  # s since the start
    assert list(line.get_ydata()) == [50.0] * 4  # W; the 999 W of the timeless row is not drawn
    assert power_figure([NodeSummary(node="n1", job_id="1", start_time=T0, end_time=T0 + 5,
                                     power_trace=[[None, 10.0, None, None]])], T0) is None


def test_utilisation_column_says_what_each_number_is():
    rec = tdp_cpu_record()
    d = rec.nodes[0].devices[0]
    d.flags = ["util_from_node_counters"]
    d.unclamped = {"cpu_util": 1.07}
    label = util_label(d)
    assert label.startswith("job: CPU time / (allocated CPUs × wall)")
    assert "node's busy CPU (all jobs)" in label and "clamped from 107.0 %" in label
    html = render_html(rec)
    assert "Utilisation (what)" in html and "Job util" not in html
    assert "job: CPU time / (allocated CPUs × wall)" in html
