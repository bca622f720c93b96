"""Redfish mockup trees for ``sushy-static`` (sushy-tools), in two vendors' shapes.

``sushy-static -m DIR`` serves ``DIR/<path under /redfish/v1>/index.json`` for each GET, as DMTF's
mockups (DSP2043) are laid out. The shapes:

* ``dmtf_rackmount`` -- DMTF's ``public-rackmount1`` mockup (DSP2043): one chassis ``1U`` with both
  ``EnvironmentMetrics`` (``EnvironmentMetrics.v1_3_0``: ``PowerWatts``/``EnergykWh`` excerpts with
  ``DataSourceUri`` and ``Reading``) and the deprecated ``Power`` resource.
* ``dell_idrac`` -- Dell iDRAC 9 (Dell "Redfish API Guide", Chassis ``System.Embedded.1`` and
  ``Enclosure.Internal.0-1``; ``Power.v1_5_0`` with ``PowerControl[0]`` ``PowerConsumedWatts`` and
  ``PowerMetrics``): no ``EnvironmentMetrics``, the enclosure first in ``Members`` without power.

Reading values are ours (the test's hand-computed inputs); names and nesting are the vendors'.
"""

from __future__ import annotations

import json
import os


def _put(root: str, path: str, doc: dict) -> None:
    d = os.path.join(root, path)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(doc, f)


def dmtf_rackmount(root, power_w: float = 374.0, energy_kwh: float = 3420.665, consumed_w: float = 370.0) -> str:
    root = str(root)
    _put(root, "", {"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                    "Chassis": {"@odata.id": "/redfish/v1/Chassis"}, "RedfishVersion": "1.15.0"})
    _put(root, "Chassis", {"@odata.id": "/redfish/v1/Chassis", "Members@odata.count": 1,
                           "Members": [{"@odata.id": "/redfish/v1/Chassis/1U"}]})
    _put(root, "Chassis/1U", {"@odata.id": "/redfish/v1/Chassis/1U", "@odata.type": "#Chassis.v1_21_0.Chassis",
                              "Id": "1U", "ChassisType": "RackMount",
                              "EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics"},
                              "Power": {"@odata.id": "/redfish/v1/Chassis/1U/Power"}})
    _put(root, "Chassis/1U/EnvironmentMetrics", {
        "@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics",
        "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics", "Id": "EnvironmentMetrics",
        "TemperatureCelsius": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/AmbientTemp", "Reading": 22.5},
        "PowerWatts": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalPower", "Reading": power_w},
        "EnergykWh": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalEnergy", "Reading": energy_kwh}})
    _put(root, "Chassis/1U/Power", {"@odata.id": "/redfish/v1/Chassis/1U/Power", "@odata.type": "#Power.v1_7_1.Power",
                                    "PowerControl": [{"@odata.id": "/redfish/v1/Chassis/1U/Power#/PowerControl/0",
                                                      "MemberId": "0", "PowerConsumedWatts": consumed_w}]})
    return root


def dell_idrac(root, consumed_w: float = 182.0) -> str:
    root = str(root)
    _put(root, "", {"@odata.id": "/redfish/v1", "Chassis": {"@odata.id": "/redfish/v1/Chassis"}})
    _put(root, "Chassis", {"@odata.id": "/redfish/v1/Chassis", "Members@odata.count": 2, "Members": [
        {"@odata.id": "/redfish/v1/Chassis/Enclosure.Internal.0-1"},
        {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1"}]})
    _put(root, "Chassis/Enclosure.Internal.0-1", {"@odata.id": "/redfish/v1/Chassis/Enclosure.Internal.0-1",
                                                  "Id": "Enclosure.Internal.0-1", "ChassisType": "Enclosure"})
    _put(root, "Chassis/System.Embedded.1", {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1",
                                             "Id": "System.Embedded.1", "ChassisType": "RackMount",
                                             "Power": {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1/Power"}})
    _put(root, "Chassis/System.Embedded.1/Power", {
        "@odata.id": "/redfish/v1/Chassis/System.Embedded.1/Power", "@odata.type": "#Power.v1_5_0.Power",
        "PowerControl": [{"@odata.id": "/redfish/v1/Chassis/System.Embedded.1/Power#/PowerControl/0",
                          "MemberId": "PowerControl", "Name": "System Power Control",
                          "PowerConsumedWatts": consumed_w, "PowerCapacityWatts": 1202,
                          "PowerMetrics": {"AverageConsumedWatts": 176, "IntervalInMin": 1,
                                           "MaxConsumedWatts": 240, "MinConsumedWatts": 170}}]})
    return root
