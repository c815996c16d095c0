-- Orthanc auto-routing to the medchallenge gateway (docs/orthanc.md): every study, once stable (no new instance
-- for Orthanc's StableAge seconds), is sent to the DICOM modality "medchallenge" of orthanc.json. The gateway routes
-- it by Modality and Body Part Examined (a study no route takes is set aside there), and sends its results back
-- as new series of the same study, which Orthanc stores and forwards again: the gateway drops its own results.
function OnStableStudy(studyId, tags, metadata)
  RestApiPost('/modalities/medchallenge/store', studyId)
end
